import pytest
from django.db import connection


@pytest.mark.django_db
def test_pgvector_extension_is_installed_by_migration():
    with connection.cursor() as cursor:
        cursor.execute("select '[1,2,3]'::vector, '[1,2,3]'::vector <-> '[1,2,4]'::vector")
        vector, distance = cursor.fetchone()
    assert str(vector).replace(" ", "") in {"[1,2,3]", "[1.0,2.0,3.0]"} or list(vector) == [1, 2, 3]
    assert distance == pytest.approx(1.0)


@pytest.mark.django_db
def test_database_is_postgresql_18():
    assert connection.vendor == "postgresql"
    assert connection.pg_version >= 180000
