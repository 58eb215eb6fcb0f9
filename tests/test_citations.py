"""A reader of the repository can follow every rule a comment cites.

Code and docs cite rules as `docs/<file>.md#<anchor>` (or `providers/README.md#<anchor>`, or `#<anchor>` within
docs), and every cited anchor must exist as an explicit `<a id="...">` in that file. Citations of documents that are
not in the repository ("SPEC §2", "invariant 8", "RFC-0002 §5", "inv. 4") are refused.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("*.py", "*.js", "*.html", "*.css", "*.md")
SKIPPED_PARTS = {".venv", "node_modules", ".data", "vendor", ".git", "test-artifacts", "__pycache__"}

CITATION = re.compile(r"((?:docs/)?[A-Za-z_]+\.md|providers/README\.md)#([a-z0-9-]+)")
UNREADABLE = re.compile(r"SPEC\s*§|\bSPEC\b(?!\.md)|\binvariants? \d+|\binv\. \d+|RFC-\d+")


def _files():
    suffixes = {pattern.removeprefix("*") for pattern in SCANNED}
    for folder, subfolders, names in os.walk(ROOT):
        subfolders[:] = [name for name in subfolders if name not in SKIPPED_PARTS and not name.startswith(".")]
        for name in names:
            if Path(name).suffix in suffixes:
                yield (Path(folder) / name).relative_to(ROOT)


def _anchors(document: Path) -> set[str]:
    return set(re.findall(r'<a id="([a-z0-9-]+)"></a>', document.read_text()))


def _target(citing: Path, name: str) -> Path:
    if "/" in name:
        return ROOT / name
    # A bare `invariants.md#x` is a link between docs, relative to the citing document.
    return ROOT / citing.parent / name


def test_every_cited_anchor_exists():
    missing = []
    for relative in _files():
        if relative.name == "test_citations.py":
            continue
        text = (ROOT / relative).read_text(errors="replace")
        for name, anchor in CITATION.findall(text):
            target = _target(relative, name)
            if not target.exists() or anchor not in _anchors(target):
                missing.append(f"{relative}: {name}#{anchor}")
        if relative.suffix == ".md":  # same-document links: [text](#anchor)
            for anchor in re.findall(r"\]\(#([a-z0-9-]+)\)", text):
                if anchor not in _anchors(ROOT / relative):
                    missing.append(f"{relative}: #{anchor}")
    assert missing == [], "citations of anchors that do not exist:\n" + "\n".join(sorted(set(missing)))


def test_no_citation_of_a_document_outside_the_repository():
    found = []
    for relative in _files():
        if relative.name == "test_citations.py":
            continue
        for number, line in enumerate((ROOT / relative).read_text(errors="replace").splitlines(), 1):
            if UNREADABLE.search(line):
                found.append(f"{relative}:{number}: {line.strip()[:100]}")
    assert found == [], "citations a reader of the repository cannot look up:\n" + "\n".join(found)


def test_the_checks_recognise_citations():
    assert CITATION.findall("see docs/invariants.md#seeding and providers/README.md#fidelity") == [
        ("docs/invariants.md", "seeding"),
        ("providers/README.md", "fidelity"),
    ]
    for text in ("(SPEC §2 invariant 10)", "invariant 8", "RFC-0002 §5", "(inv. 4)"):
        assert UNREADABLE.search(text), text
    assert not UNREADABLE.search("the SPEC.md file is not cited here")
