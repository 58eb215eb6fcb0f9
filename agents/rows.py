"""Reading and writing the runtime's rows with SQL built once per process, not by the ORM on every step.

A turn reads its firing twice and writes it, its step and the ledger a few times; at zero provider delay the ORM's
query compilation and model machinery were most of a turn's CPU (bench/turn_profile.py). These helpers keep the
ORM's meaning — the same columns, the fields' own conversions to and from the database (`from_db_value`,
`get_db_prep_save`, `auto_now`), model instances as callers expect them — and skip rebuilding the same SQL each time.
Row locks are not taken here (agents/locks.py builds its locking reads from `select_columns` and `instance_of`).
"""

from __future__ import annotations

import functools

from django.db import DatabaseError, connection, models

from core.statements import with_clauses


def select_columns(model: type[models.Model], alias: str, *, leave_out: tuple[str, ...] = ()) -> str:
    """`alias.col, ...` for the model's concrete fields but `leave_out` (in field order, as `instance_of` reads)."""
    return ", ".join(f'{alias}."{f.column}"' for f in columns_of(model, leave_out))


@functools.cache
def columns_of(model: type[models.Model], leave_out: tuple[str, ...] = ()) -> tuple:
    return tuple(f for f in model._meta.concrete_fields if f.name not in leave_out)


@functools.cache
def _converters(model: type[models.Model], leave_out: tuple[str, ...]) -> tuple:
    return tuple(
        (index, field.from_db_value)
        for index, field in enumerate(columns_of(model, leave_out))
        if hasattr(field, "from_db_value")
    )


@functools.cache
def _attnames(model: type[models.Model], leave_out: tuple[str, ...]) -> list[str]:
    return [f.attname for f in columns_of(model, leave_out)]


def instance_of(model: type[models.Model], values, *, leave_out: tuple[str, ...] = ()):
    """A model instance from a row of `select_columns(model, ..., leave_out=leave_out)`, as the ORM would build it
    (the fields' `from_db_value` applied; the left-out fields deferred, loaded on first use)."""
    values = list(values)
    for index, convert in _converters(model, leave_out):
        if values[index] is not None:
            values[index] = convert(values[index], None, connection)
    return model.from_db(connection.alias, _attnames(model, leave_out), values)


@functools.cache
def _update_sql(model: type[models.Model], names: tuple[str, ...]) -> tuple[str, tuple]:
    fields = tuple(model._meta.get_field(name) for name in names)
    assignments = ", ".join(f'"{f.column}" = %s' for f in fields)
    return f'UPDATE "{model._meta.db_table}" SET {assignments} WHERE "{model._meta.pk.column}" = %s', fields


def update_fields(instance: models.Model, names, *, along: list[tuple[str, str, list]] = ()) -> None:
    """`instance.save(update_fields=names)` as one UPDATE whose SQL is built once per model and field set (the
    fields' `pre_save`, so `auto_now`, and `get_db_prep_save` apply as in `save`). No model signals are sent: the
    runtime's models have no receivers. Raises DatabaseError when the row is gone, as `save` does.

    `along`: named statements `(name, sql, params)` sent in the same statement as WITH clauses (writes to other rows
    of the same transaction that nothing reads before this one; see `firing_write_along`)."""
    sql, fields = _update_sql(type(instance), tuple(sorted(names)))
    params = [f.get_db_prep_save(f.pre_save(instance, False), connection) for f in fields]
    params.append(instance.pk)
    if along:
        clauses, along_params = with_clauses(along)
        sql, params = f"{clauses} {sql}", along_params + params
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        if cursor.rowcount != 1:
            raise DatabaseError("Save with update_fields did not affect any rows.")


def execute_statements(statements: list[tuple[str, str, list]]) -> None:
    """Send named statements `(name, sql, params)` as one statement of WITH clauses (no write of the caller's own
    to carry them)."""
    if not statements:
        return
    clauses, params = with_clauses(statements)
    with connection.cursor() as cursor:
        cursor.execute(f"{clauses} SELECT 1", params)


@functools.cache
def _update_where_sql(model: type[models.Model], names: tuple[str, ...], where: tuple[str, ...]) -> tuple[str, tuple]:
    fields = tuple(model._meta.get_field(name) for name in names)
    conditions = tuple(model._meta.get_field(name) for name in where)
    assignments = ", ".join(f'"{f.column}" = %s' for f in fields)
    matches = " AND ".join(f'"{f.column}" = %s' for f in conditions)
    return f'UPDATE "{model._meta.db_table}" SET {assignments} WHERE {matches}', fields + conditions


def update_where(model: type[models.Model], where: dict, **values) -> int:
    """`model.objects.filter(**where).update(**values)` (equality conditions only) as one UPDATE built once per
    model and set of names; the number of rows changed. Values go through their fields' `get_db_prep_save`."""
    names, keys = tuple(sorted(values)), tuple(sorted(where))
    sql, fields = _update_where_sql(model, names, keys)
    params = [*(values[n] for n in names), *(where[k] for k in keys)]
    with connection.cursor() as cursor:
        cursor.execute(sql, [f.get_db_prep_save(v, connection) for f, v in zip(fields, params, strict=True)])
        return cursor.rowcount


@functools.cache
def _insert_sql(model: type[models.Model]) -> tuple[str, tuple]:
    fields = tuple(model._meta.concrete_fields)
    columns = ", ".join(f'"{f.column}"' for f in fields)
    return f'INSERT INTO "{model._meta.db_table}" ({columns}) VALUES ({", ".join(["%s"] * len(fields))})', fields


def insert(instance: models.Model) -> None:
    """`instance.save(force_insert=True)` for a model whose primary key is set before (a UUID default) as one INSERT
    built once per model (the fields' `pre_save`, so `auto_now_add`, and `get_db_prep_save` apply as in `save`).
    No model signals are sent: the runtime's models have no receivers."""
    sql, fields = _insert_sql(type(instance))
    with connection.cursor() as cursor:
        cursor.execute(sql, [f.get_db_prep_save(f.pre_save(instance, True), connection) for f in fields])
    instance._state.adding = False
    instance._state.db = connection.alias
