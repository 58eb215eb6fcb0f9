"""The one check for text PostgreSQL cannot store, used wherever text enters (URL, query, body, form, tool call).

PostgreSQL `text` and `jsonb` refuse NUL (U+0000), and a lone UTF-16 surrogate (U+D800..U+DFFF, which a JSON
`\\ud800` escape produces) cannot be encoded as UTF-8 at all. Either one reaching the database fails the statement
(a 500, a rolled-back write); refusing it where it enters gives the caller a 400 with a code instead.
"""

from __future__ import annotations

import re
import unicodedata

from core.errors import ServiceError

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


class UnstorableText(ServiceError):
    status = 400
    default_code = "invalid_text"


def unstorable_reason(value: str) -> str | None:
    match = _UNSTORABLE.search(value)
    if match is None:
        return None
    return "a NUL character (U+0000)" if match.group() == "\x00" else "an unpaired surrogate"


def require_storable_text(value: str, *, field: str) -> str:
    reason = unstorable_reason(value)
    if reason:
        raise UnstorableText(message=f"{field} contains {reason}, which cannot be stored.", extra={"field": field})
    return value


def find_unstorable(value, *, path: str = "body") -> str | None:
    """The path of the first string (key or value) in a JSON-like document that cannot be stored, or None.

    Iterative like the depth check, so a deep document cannot exhaust the stack here either.
    """
    stack = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            if _UNSTORABLE.search(item):
                return where
        elif isinstance(item, dict):
            for key, child in item.items():
                if isinstance(key, str) and _UNSTORABLE.search(key):
                    return f"{where} (a key)"
                stack.append((child, f"{where}.{key}"))
        elif isinstance(item, list | tuple):
            stack.extend((child, f"{where}[{index}]") for index, child in enumerate(item))
    return None


def require_storable(value, *, field: str = "body"):
    where = find_unstorable(value, path=field)
    if where is not None:
        raise UnstorableText(
            message=f"{where} contains a NUL character or an unpaired surrogate, which cannot be stored.",
            extra={"field": where},
        )
    return value


# Characters that show nothing on their own: format characters (zero-width space and joiners, direction marks,
# embeddings, overrides and isolates, tag characters, the byte-order mark), controls, separators and combining
# marks, plus the letters and symbols fonts draw blank (Hangul fillers, the braille blank).
_INVISIBLE_CATEGORIES = frozenset({"Cf", "Cc", "Cs", "Co", "Cn", "Zs", "Zl", "Zp", "Mn", "Me"})
_BLANK_GLYPHS = frozenset("\u115f\u1160\u3164\uffa0\u2800\u180e")


def is_invisible_text(value: str) -> bool:
    """True when nothing of `value` would show: an empty string or one made only of the characters above."""
    return all(char in _BLANK_GLYPHS or unicodedata.category(char) in _INVISIBLE_CATEGORIES for char in value)


def require_visible_name(value: str, *, field: str = "name") -> str:
    """Refuse a name that would show as blank (or only reorder what is around it) in every list it appears in:
    one made only of invisible or direction-changing characters cannot be told apart from another, or read."""
    if value and is_invisible_text(value):
        raise ServiceError(
            "invalid_name",
            f"The {field} is made only of invisible or direction-changing characters "
            "(such as zero-width spaces or a right-to-left override): use visible characters.",
            extra={"field": field},
        )
    return value
