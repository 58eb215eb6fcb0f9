from django.db import migrations

from memory.embedders.indexes import index_name, vector_index_sql

# The default embedder (memory/embedders/minilm_onnx.py): 384 dimensions. The `embedding` column has no fixed
# dimension; each model's vectors get a partial expression index at their own size, so the new default needs its own.
DEFAULT_MODEL = ("onnx:all-MiniLM-L6-v2-int8", 384)


class Migration(migrations.Migration):
    dependencies = [("memory", "0003_embedding_namespace")]

    operations = [
        migrations.RunSQL(
            vector_index_sql(*DEFAULT_MODEL, concurrently=False),
            reverse_sql=f"DROP INDEX IF EXISTS {index_name(*DEFAULT_MODEL)}",
        )
    ]
