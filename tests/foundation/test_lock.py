"""Issue 31: the test command refuses a requirements.lock that does not match pyproject.toml, saying which command
fixes it, so CI catches a stale lock instead of a first run printing a warning."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _dev():
    spec = importlib.util.spec_from_file_location("dev_commands", ROOT / "dev.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PYPROJECT = """[project]
name = "opencompany"
requires-python = ">=3.11"
dependencies = ["django>=5.2,<5.3", "redis>=5,<9"]

[project.optional-dependencies]
test = ["pytest>=8,<10"]

[tool.pytest.ini_options]
addopts = "-ra"
"""


def _lock_for(dev, pyproject: Path, pins: str) -> str:
    return f"# header\n{dev.LOCK_STAMP_PREFIX}{dev._pyproject_digest(pyproject)}\n{pins}"


def test_the_project_lock_matches_its_pyproject():
    assert _dev().lock_problems() == []


def test_a_lock_made_from_other_dependencies_is_refused(tmp_path):
    dev = _dev()
    pyproject, lock = tmp_path / "pyproject.toml", tmp_path / "requirements.lock"
    pyproject.write_text(PYPROJECT)
    pins = "django==5.2.8 \\\n    --hash=sha256:00\nredis==6.4.0 \\\n    --hash=sha256:00\npytest==9.0.1 \\\n"
    lock.write_text(_lock_for(dev, pyproject, pins))
    assert dev.lock_problems(pyproject, lock) == []

    # A setting that pins nothing leaves the lock current.
    pyproject.write_text(PYPROJECT.replace('addopts = "-ra"', 'addopts = "-ra -q"'))
    assert dev.lock_problems(pyproject, lock) == []

    # A dependency added since the lock was made.
    pyproject.write_text(PYPROJECT.replace('"redis>=5,<9"]', '"redis>=5,<9", "httpx>=0.27"]'))
    problems = dev.lock_problems(pyproject, lock)
    assert any("other dependencies" in p for p in problems), problems
    assert "httpx is declared but not pinned in requirements.lock" in problems

    # A lock whose stamp is current but whose pin falls outside the declared range (edited by hand).
    pyproject.write_text(PYPROJECT)
    lock.write_text(_lock_for(dev, pyproject, pins.replace("django==5.2.8", "django==6.0")))
    assert dev.lock_problems(pyproject, lock) == ["django==6.0 in requirements.lock is outside <5.3,>=5.2"]

    lock.unlink()
    assert dev.lock_problems(pyproject, lock) == ["requirements.lock is missing"]


def test_the_test_command_stops_on_a_stale_lock_and_names_the_fix(tmp_path):
    # dev.py run from a copy of the checkout whose pyproject declares one more dependency than its lock.
    for name in ("dev.py", "requirements.lock"):
        (tmp_path / name).write_bytes((ROOT / name).read_bytes())
    text = (ROOT / "pyproject.toml").read_text()
    (tmp_path / "pyproject.toml").write_text(
        text.replace("dependencies = [\n", 'dependencies = [\n  "no-such-dependency>=1",\n', 1)
    )
    result = subprocess.run(
        [sys.executable, str(tmp_path / "dev.py"), "test"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"OPENCOMPANY_VENV": sys.prefix, "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "requirements.lock does not match pyproject.toml" in result.stdout
    assert "no-such-dependency is declared but not pinned" in result.stdout
    assert "python3 dev.py lock" in result.stdout
