"""Word-level difference between two versions of a memory, for the history page (versions side by side with the
change marked). Whitespace runs are tokens too, so the marked text reads back exactly as it was stored."""

from __future__ import annotations

import re
from difflib import SequenceMatcher

_TOKENS = re.compile(r"\s+|[^\s]+")


def _tokens(text: str) -> list[str]:
    return _TOKENS.findall(text or "")


def word_diff(before: str, after: str) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(before's segments, after's segments), each a list of (kind, text) with kind `same`, `del` (only in
    before) or `ins` (only in after); adjacent segments of one kind are joined."""
    old, new = _tokens(before), _tokens(after)
    left: list[tuple[str, str]] = []
    right: list[tuple[str, str]] = []

    def add(side: list[tuple[str, str]], kind: str, text: str) -> None:
        if not text:
            return
        if side and side[-1][0] == kind:
            side[-1] = (kind, side[-1][1] + text)
        else:
            side.append((kind, text))

    for op, i1, i2, j1, j2 in SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        if op == "equal":
            add(left, "same", "".join(old[i1:i2]))
            add(right, "same", "".join(new[j1:j2]))
        else:
            add(left, "del", "".join(old[i1:i2]))
            add(right, "ins", "".join(new[j1:j2]))
    return left, right


def inline_diff(before: str, after: str) -> list[tuple[str, str]]:
    """One run of segments for a single line of text: the words taken out (`del`) right before the words put in
    (`ins`), the rest `same`, so the history list marks a changed word where it changed, as the side-by-side view
    does."""
    old, new = _tokens(before), _tokens(after)
    out: list[tuple[str, str]] = []
    for op, i1, i2, j1, j2 in SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        parts = (
            [("same", "".join(new[j1:j2]))]
            if op == "equal"
            else [
                ("del", "".join(old[i1:i2])),
                ("ins", "".join(new[j1:j2])),
            ]
        )
        for kind, text in parts:
            if not text:
                continue
            if out and out[-1][0] == kind:
                out[-1] = (kind, out[-1][1] + text)
            else:
                out.append((kind, text))
    return out
