"""A file's name as the owner sees it again: no path, no control or invisible characters, no leading dots, at most
NAME_MAX characters with its extension kept."""

from __future__ import annotations

import re
import unicodedata

NAME_MAX = 120
_UNSAFE = re.compile(r'[\\/:*?"<>|\x00-\x1f\x7f]')


def sanitize_name(raw: str) -> str:
    name = unicodedata.normalize("NFC", str(raw or ""))
    name = name.replace("\\", "/").rsplit("/", 1)[-1]  # a path sent as the name: its last part
    # Format characters (bidi overrides, zero-width) can make "exe.png" read as "png.exe"; categories C* go.
    name = "".join(ch for ch in name if not unicodedata.category(ch).startswith("C"))
    name = _UNSAFE.sub("_", name)
    name = " ".join(name.split()).strip(" .")
    if not name:
        return "file"
    if len(name) > NAME_MAX:
        stem, dot, extension = name.rpartition(".")
        if dot and 0 < len(extension) <= 10:
            name = stem[: NAME_MAX - len(extension) - 1].rstrip(" .") + "." + extension
        else:
            name = name[:NAME_MAX].rstrip(" .")
    return name
