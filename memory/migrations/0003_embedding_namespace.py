from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("memory", "0002_vector_indexes")]

    operations = [
        migrations.AddField(
            model_name="memoryembedding",
            name="namespace",
            field=models.ForeignKey(
                null=True,
                db_index=False,
                on_delete=models.deletion.CASCADE,
                related_name="+",
                to="memory.memorynamespace",
            ),
        ),
        migrations.RunSQL(
            "UPDATE memory_memoryembedding e SET namespace_id = i.namespace_id "
            "FROM memory_memoryitem i WHERE i.id = e.item_id",
            reverse_sql=migrations.RunSQL.noop,
        ),
        migrations.AlterField(
            model_name="memoryembedding",
            name="namespace",
            field=models.ForeignKey(
                db_index=False,
                on_delete=models.deletion.CASCADE,
                related_name="+",
                to="memory.memorynamespace",
            ),
        ),
        migrations.AddIndex(
            model_name="memoryembedding",
            index=models.Index(fields=["namespace", "model", "status"], name="memory_embedding_ns_model"),
        ),
    ]
