import django.contrib.postgres.indexes
import django.contrib.postgres.search
from django.db import migrations, models

# Title lexemes (weight A) plus the content lexemes that occur at least twice. IMMUTABLE (the configuration is a
# constant), so it can define a stored generated column.
CREATE_FUNCTION = """
CREATE OR REPLACE FUNCTION memory_salient_tsvector(title text, content text) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT setweight(to_tsvector('english'::regconfig, coalesce(title, '')), 'A')
      || coalesce(array_to_tsvector(ARRAY(
             SELECT t.lexeme FROM unnest(to_tsvector('english'::regconfig, coalesce(content, ''))) AS t
             WHERE cardinality(t.positions) >= 2)), ''::tsvector)
$$
"""


class Migration(migrations.Migration):
    dependencies = [("memory", "0004_default_embedder_index")]

    operations = [
        migrations.RunSQL(CREATE_FUNCTION, reverse_sql="DROP FUNCTION IF EXISTS memory_salient_tsvector(text, text)"),
        migrations.AddField(
            model_name="memoryitem",
            name="search_salient",
            field=models.GeneratedField(
                db_persist=True,
                expression=models.Func(
                    models.F("title"),
                    models.F("content"),
                    function="memory_salient_tsvector",
                    output_field=django.contrib.postgres.search.SearchVectorField(),
                ),
                output_field=django.contrib.postgres.search.SearchVectorField(),
            ),
        ),
        migrations.AddIndex(
            model_name="memoryitem",
            index=django.contrib.postgres.indexes.GinIndex(fields=["search_salient"], name="memory_item_salient"),
        ),
    ]
