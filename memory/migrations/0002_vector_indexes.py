from django.db import migrations

from memory.embedders.indexes import index_name, vector_index_sql

# Models known at release time; any other model gets its index from memory_reindex or its first embedding.
KNOWN_MODELS = [("local:all-MiniLM-L6-v2", 384), ("openai:text-embedding-3-small", 1536)]


class Migration(migrations.Migration):
    dependencies = [("memory", "0001_initial")]

    operations = [
        migrations.RunSQL(
            vector_index_sql(model, dims, concurrently=False),
            reverse_sql=f"DROP INDEX IF EXISTS {index_name(model, dims)}",
        )
        for model, dims in KNOWN_MODELS
    ]
