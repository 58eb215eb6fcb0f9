from django.db import migrations, models

from memory.embedders.indexes import outlier_index_name, vector_index_sql

# The models whose main index an earlier migration made (0002, 0004) get their outlier index here; any other model
# gets both from memory_reindex or its first embedding (memory/embedders/indexes.py).
KNOWN_MODELS = [
    ("local:all-MiniLM-L6-v2", 384),
    ("openai:text-embedding-3-small", 1536),
    ("onnx:all-MiniLM-L6-v2-int8", 384),
]


class Migration(migrations.Migration):
    dependencies = [("memory", "0006_history_provenance")]

    operations = [
        migrations.AddField(
            model_name="memoryembedding",
            name="outlier",
            field=models.BooleanField(db_default=False, default=False),
        ),
        *(
            migrations.RunSQL(
                vector_index_sql(model, dims, concurrently=False, outliers=True),
                reverse_sql=f"DROP INDEX IF EXISTS {outlier_index_name(model, dims)}",
            )
            for model, dims in KNOWN_MODELS
        ),
    ]
