"""Who still refers to a stored file. The apps that keep `file` blocks (the chat's messages and branch snapshots,
the conversation store) hand a source over at start-up; the orphan sweep (files/services.py) asks them all."""

from __future__ import annotations

from collections.abc import Callable, Iterable

# A source takes candidate hashes and answers the (owner id, sha256) pairs it still refers to.
ReferenceSource = Callable[[set[str]], Iterable[tuple[int, str]]]

_sources: dict[str, ReferenceSource] = {}


def register_file_reference_source(source: ReferenceSource, *, name: str) -> None:
    _sources[name] = source


def referenced_files(hashes: set[str]) -> set[tuple[int, str]]:
    found: set[tuple[int, str]] = set()
    if not hashes:
        return found
    for source in list(_sources.values()):
        found.update((int(owner_id), str(sha256)) for owner_id, sha256 in source(hashes))
    return found
