"""Helpers of the files tests (fixtures live in conftest.py)."""

from __future__ import annotations


def stored_objects(folder) -> list[str]:
    """The names of the objects in a local file storage folder (each a SHA-256)."""
    return sorted(p.name for p in folder.rglob("*") if p.is_file()) if folder.exists() else []
