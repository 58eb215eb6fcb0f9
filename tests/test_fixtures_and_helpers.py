"""Fixtures live in conftest.py files, which pytest loads itself; helpers live in helper modules, which tests import.
A conftest imported as a module runs twice under two names (its fixtures registered again, its module state
doubled), so no test file imports one."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _imported_modules(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            joint = "" if module.endswith(".") else "."
            names += [module] + [f"{module}{joint}{alias.name}" for alias in node.names]
    return names


def test_no_test_file_imports_a_conftest():
    offenders = sorted(
        f"{path.relative_to(TESTS)} imports {name}"
        for path in TESTS.rglob("*.py")
        for name in _imported_modules(path)
        if "conftest" in name.replace(".", " ").split()
    )
    assert offenders == []


def test_the_walk_finds_a_conftest_import(tmp_path):
    sample = tmp_path / "test_sample.py"
    sample.write_text("from tests.chat.conftest import chat_workflow\nfrom . import conftest\nimport os\n")
    found = [name for name in _imported_modules(sample) if "conftest" in name.replace(".", " ").split()]
    assert found == ["tests.chat.conftest", "tests.chat.conftest.chat_workflow", ".conftest"]
