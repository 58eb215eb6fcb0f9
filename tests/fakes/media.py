"""What the provider fakes need to check attached files the way the providers do: decode base64 and data URLs,
tell an image's real format from its bytes, count a PDF's pages. Independent of providers/ (a fake follows the
providers' documentation, never our code)."""

from __future__ import annotations

import base64
import binascii
import io


class BadMedia(ValueError):
    pass


def b64decode(data: object) -> bytes:
    """Standard or URL-safe base64, padded or not (the SDKs differ); BadMedia when it is not base64."""
    if not isinstance(data, str) or not data:
        raise BadMedia("not a base64 string")
    padded = data + "=" * (-len(data) % 4)
    try:
        return base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise BadMedia(str(exc)) from None


def data_url(value: object) -> tuple[str, bytes]:
    """(media type, bytes) of a `data:<type>;base64,<data>` URL."""
    if not isinstance(value, str) or not value.startswith("data:") or ";base64," not in value:
        raise BadMedia("not a base64 data URL")
    head, data = value[5:].split(";base64,", 1)
    return head, b64decode(data)


def sniff(data: bytes) -> str | None:
    """The media type the bytes are, from their magic numbers."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    if data.startswith(b"%PDF-"):
        return "application/pdf"
    return None


def pdf_pages(data: bytes) -> int:
    from pypdf import PdfReader

    try:
        return len(PdfReader(io.BytesIO(data)).pages)
    except Exception as exc:
        raise BadMedia(f"unreadable PDF: {exc}") from None
