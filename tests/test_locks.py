"""Every row lock goes through a lock helper module (`<app>/locks.py`, the store's `conversations/store/locks.py`).

A helper's docstring names its place in the written lock order (docs/architecture.md#lock-order), so a lock taken
anywhere else is a lock nobody placed in that order. This test finds `select_for_update(...)` calls and SQL text
that locks rows (`FOR UPDATE`, `FOR NO KEY UPDATE`, `FOR SHARE`, `FOR KEY SHARE`) outside those modules.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.python_source import parse
from tests.test_layers import ROOT, _declared_layers

ROW_LOCK_SQL = re.compile(r"\bFOR\s+(NO\s+KEY\s+UPDATE|UPDATE|KEY\s+SHARE|SHARE)\b", re.I)


def _is_lock_module(path: Path) -> bool:
    return path.name == "locks.py"


def row_locks_in(source: str, filename: str = "<source>") -> list[int]:
    """Lines of `source` that take a row lock: a `select_for_update` call, or a string with locking SQL."""
    lines = []
    for node in ast.walk(parse(source, filename)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr == "select_for_update":
                lines.append(node.lineno)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and ROW_LOCK_SQL.search(node.value):
            # Docstrings and comments that only talk about locking are prose, not SQL.
            if re.search(r"\b(SELECT|INSERT|UPDATE|DELETE)\b", node.value) and "\n\n" not in node.value:
                lines.append(node.lineno)
    return sorted(set(lines))


def _source_files():
    apps, _ = _declared_layers()
    for app in apps:
        for path in sorted((ROOT / app).rglob("*.py")):
            if "migrations" not in path.parts:
                yield path


def test_row_locks_are_taken_only_in_lock_modules():
    found = []
    for path in _source_files():
        relative = str(path.relative_to(ROOT))
        if _is_lock_module(path):
            continue
        found += [f"{relative}:{line}" for line in row_locks_in(path.read_text(), relative)]
    assert found == [], "row locks outside a locks.py helper:\n" + "\n".join(found)


def test_every_lock_module_names_its_place_in_the_lock_order():
    modules = [path for path in _source_files() if _is_lock_module(path)]
    assert len(modules) >= 5
    for path in modules:
        doc = ast.get_docstring(parse(path.read_text(), str(path))) or ""
        assert "docs/architecture.md#lock-order" in doc, f"{path.relative_to(ROOT)} does not name its lock order"
        for function in ast.parse(path.read_text()).body:
            if isinstance(function, ast.FunctionDef) and not function.name.startswith("_"):
                assert ast.get_docstring(function), f"{path.relative_to(ROOT)}:{function.name} has no docstring"


def test_the_check_finds_orm_and_sql_locks():
    source = '''
def a():
    return Thing.objects.select_for_update(no_key=True).get(pk=1)

def b(cursor):
    cursor.execute("SELECT id FROM thing WHERE id = %s FOR NO KEY UPDATE", [1])

def c():
    """Locks nothing: a docstring that says FOR UPDATE.

    More prose."""
'''
    assert row_locks_in(source) == [3, 6]
