"""A file's type decided from its bytes (magic numbers), never from its name or the browser's claim.

The name and the claimed type may only agree with the bytes: a `.png` whose bytes are a JPEG, or an upload the
browser calls `application/pdf` whose bytes are text, is refused as lying about its type. A binary type whose end
marker is missing (a PNG without IEND, a PDF without %%EOF) is refused as truncated.
"""

from __future__ import annotations

import json

from core.errors import ServiceError

PNG, JPEG, WEBP, GIF, PDF = "image/png", "image/jpeg", "image/webp", "image/gif", "application/pdf"
TEXT, MARKDOWN, CSV, JSON = "text/plain", "text/markdown", "text/csv", "application/json"

IMAGE_TYPES = frozenset({PNG, JPEG, WEBP, GIF})
TEXT_TYPES = frozenset({TEXT, MARKDOWN, CSV, JSON})
ACCEPTED = (*sorted(IMAGE_TYPES), PDF, *sorted(TEXT_TYPES))

# What a name's extension says the file is. Text extensions only pick among the text types once the bytes are text.
_BINARY_EXTENSIONS = {"png": PNG, "jpg": JPEG, "jpeg": JPEG, "webp": WEBP, "gif": GIF, "pdf": PDF}
_TEXT_EXTENSIONS = {"txt": TEXT, "text": TEXT, "log": TEXT, "md": MARKDOWN, "markdown": MARKDOWN, "csv": CSV}
_TEXT_EXTENSIONS["json"] = JSON
# Claims browsers send for text files whatever their kind (a CSV is often "application/vnd.ms-excel").
_TEXT_CLAIMS = frozenset({*TEXT_TYPES, "text/x-markdown", "application/vnd.ms-excel", "text/x-csv"})
_NO_CLAIM = frozenset({"", "application/octet-stream", "binary/octet-stream"})
# Markup a browser would render: never accepted, whatever the file is named (downloads are attachments anyway).
_MARKUP_STARTS = (b"<!doctype html", b"<html", b"<svg", b"<?xml", b"<script", b"<head", b"<body", b"<iframe")

WORDS = {PNG: "PNG", JPEG: "JPEG", WEBP: "WebP", GIF: "GIF", PDF: "PDF"}
WORDS |= {TEXT: "text", MARKDOWN: "Markdown", CSV: "CSV", JSON: "JSON"}


class FileRefused(ServiceError):
    """An upload refused before anything is stored; the message names the file and the reason."""

    default_code = "file_refused"

    def __init__(self, code: str, message: str, *, name: str = "", status: int = 400):
        super().__init__(code, message, status=status, extra={"file": name} if name else None)


def _magic(data: bytes) -> str | None:
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return PNG
    if data.startswith(b"\xff\xd8\xff"):
        return JPEG
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return WEBP
    if data.startswith((b"GIF87a", b"GIF89a")):
        return GIF
    if data.startswith(b"%PDF-"):
        return PDF
    return None


def _complete(media_type: str, data: bytes) -> bool:
    """Whether a binary file carries its format's end: an upload cut short fails here, not at the provider."""
    if media_type == PNG:
        return b"IEND" in data[-12:]
    if media_type == JPEG:
        return b"\xff\xd9" in data[-64:]
    if media_type == GIF:
        return data.rstrip(b"\x00").endswith(b"\x3b")
    if media_type == WEBP:
        return len(data) >= 12 and int.from_bytes(data[4:8], "little") + 8 <= len(data)
    if media_type == PDF:
        return b"%%EOF" in data[-1024:]
    return True


def _text_type(data: bytes, extension: str, name: str) -> str:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise FileRefused(
            "file_type_refused",
            f"{name} is not an accepted type: its bytes are neither an image (PNG, JPEG, WebP, GIF), a PDF nor "
            "UTF-8 text.",
            name=name,
        ) from None
    if "\x00" in text:
        raise FileRefused("file_type_refused", f"{name} is not an accepted type: it holds binary data.", name=name)
    if text.lstrip()[:40].lower().encode().startswith(_MARKUP_STARTS):
        raise FileRefused("file_type_refused", f"{name} is HTML, SVG or XML markup, which is not accepted.", name=name)
    media_type = _TEXT_EXTENSIONS.get(extension)
    if media_type is None and extension:
        raise FileRefused(
            "file_type_refused",
            f"{name}: .{extension} files are not accepted (text may be .txt, .md, .csv or .json).",
            name=name,
        )
    media_type = media_type or TEXT
    if media_type == JSON:
        try:
            json.loads(text)
        except ValueError:
            raise FileRefused(
                "file_type_mismatch", f"{name} is named .json but its text is not valid JSON.", name=name
            ) from None
    return media_type


def sniff_media_type(data: bytes, *, name: str, claimed: str = "") -> str:
    """The accepted media type of `data`, or FileRefused saying why (not accepted, lying, truncated, empty)."""
    if not data:
        raise FileRefused("file_empty", f"{name} is empty.", name=name)
    extension = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    claimed = (claimed or "").split(";", 1)[0].strip().lower()
    media_type = _magic(data)
    if media_type is not None:
        named = _BINARY_EXTENSIONS.get(extension) or _TEXT_EXTENSIONS.get(extension)
        if named is not None and named != media_type:
            raise FileRefused(
                "file_type_mismatch",
                f"{name} is named as {WORDS[named]} but its bytes are {WORDS[media_type]}.",
                name=name,
            )
        if claimed not in _NO_CLAIM and claimed != media_type:
            raise FileRefused(
                "file_type_mismatch",
                f"{name} was sent as {claimed} but its bytes are {WORDS[media_type]}.",
                name=name,
            )
        if not _complete(media_type, data):
            raise FileRefused(
                "file_truncated",
                f"{name} looks cut short: the {WORDS[media_type]} ends before its end marker. Upload it again.",
                name=name,
            )
        return media_type
    if extension in _BINARY_EXTENSIONS:
        raise FileRefused(
            "file_type_mismatch",
            f"{name} is named as {WORDS[_BINARY_EXTENSIONS[extension]]} but its bytes are not.",
            name=name,
        )
    if claimed not in _NO_CLAIM and claimed not in _TEXT_CLAIMS:
        raise FileRefused(
            "file_type_mismatch", f"{name} was sent as {claimed} but its bytes are not that type.", name=name
        )
    return _text_type(data, extension, name)
