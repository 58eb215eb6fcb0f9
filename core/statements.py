"""Named statements `(name, sql, params)`: writes a caller sends together, as the WITH clauses of one statement,
so that they cost one round trip (the runtime bills a turn, marks its step and releases its lease with the firing's
last write)."""

from __future__ import annotations


def with_clauses(statements: list[tuple[str, str, list]]) -> tuple[str, list]:
    """`WITH name AS (sql), ...` for `statements`, and their params in order."""
    clauses = ", ".join(f"{name} AS ({sql})" for name, sql, _ in statements)
    return f"WITH {clauses}", [param for _, _, params in statements for param in params]
