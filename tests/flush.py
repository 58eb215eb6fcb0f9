"""How a transactional test's database is emptied after it (pytest-django's `transaction=True`).

Django empties every table with one TRUNCATE, which gives each table a new file: about 0.25 s on a quiet machine
and a second under load, paid after each of some 500 tests. DELETE empties the same tables in milliseconds, since
test tables hold a few rows. The result is the same empty database:
- every table is locked first, as TRUNCATE would, so a web process or worker still finishing cannot slip a row in;
- Django's foreign keys are DEFERRABLE INITIALLY DEFERRED, so the order of the DELETEs does not matter;
- a table DELETE cannot serve is still truncated, only when it holds rows: one with row triggers (the usage ledger
  refuses DELETE, by design) and one with a vector index (deleted rows would stay in the HNSW graph and crowd a
  later test's nearest neighbours).

After a flush Django sends `post_migrate`, whose receivers re-create every content type and permission: some 150
queries, half a second per test. Those two tables are what `migrate` filled when the test database was made, no test
changes them, so they are kept and the signal is not sent again.
"""

from __future__ import annotations

from functools import cache

_TRUNCATED_WHEN_FILLED_SQL = """
select distinct c.relname
from pg_class c
where c.relnamespace = 'public'::regnamespace and c.relkind = 'r' and (
    exists (select 1 from pg_trigger t where t.tgrelid = c.oid and not t.tgisinternal)
    or exists (
        select 1 from pg_index i join pg_class ic on ic.oid = i.indexrelid join pg_am am on am.oid = ic.relam
        where i.indrelid = c.oid and am.amname in ('hnsw', 'ivfflat')
    )
)
"""


KEPT_TABLES = frozenset({"django_content_type", "auth_permission"})


@cache
def _truncated_when_filled(alias: str) -> frozenset[str]:
    from django.db import connections

    with connections[alias].cursor() as cursor:
        cursor.execute(_TRUNCATED_WHEN_FILLED_SQL)
        return frozenset(name for (name,) in cursor.fetchall())


def install_fast_flush() -> None:
    from django.core.management.commands import flush
    from django.db.backends.postgresql.operations import DatabaseOperations

    truncate_all = DatabaseOperations.sql_flush

    def sql_flush(self, style, tables, *, reset_sequences=False, allow_cascade=False):
        if reset_sequences or not tables:
            return truncate_all(self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
        quote = self.quote_name
        tables = [t for t in tables if t not in KEPT_TABLES]
        special = _truncated_when_filled(self.connection.alias)
        statements = [f"LOCK TABLE {', '.join(quote(t) for t in tables)} IN ACCESS EXCLUSIVE MODE;"]
        for table in sorted(special.intersection(tables)):
            statements.append(
                f"DO $$ BEGIN IF EXISTS (SELECT 1 FROM {quote(table)}) THEN TRUNCATE {quote(table)} CASCADE; "
                "END IF; END $$;"
            )
        statements += [f"DELETE FROM {quote(t)};" for t in tables if t not in special]
        return statements

    DatabaseOperations.sql_flush = sql_flush
    flush.emit_post_migrate_signal = lambda *args, **kwargs: None
