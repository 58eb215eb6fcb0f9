"""Real files for attachment tests (a PNG, a GIF, a PDF with text on each page, CSV, JSON) and a file store over a
dict that registers itself as the providers' file reader (providers/files.py)."""

from __future__ import annotations

import hashlib
import struct
import zlib
from contextlib import contextmanager

from providers import files as provider_files


def png(width: int = 4, height: int = 3) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def gif() -> bytes:
    return (
        b"GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff!\xf9\x04\x01\x00\x00\x00\x00,"
        b"\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;"
    )


def pdf(pages: int = 2, text: str = "Invoice 42 total 17 EUR") -> bytes:
    """A valid PDF of `pages` pages, each showing `text` and its page number (extractable by pypdf)."""
    objects: list[bytes] = []
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(pages))
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {pages} >>".encode())
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    for i in range(pages):
        stream = f"BT /F1 12 Tf 72 720 Td ({text} page {i + 1}) Tj ET".encode()
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
            f"/Contents {5 + 2 * i} 0 R >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


CSV = b"name,amount\nalice,3\nbob,4\n"
JSON = b'{"status": "paid", "amount": 17}'


class FileStore:
    """sha256 -> bytes, registered as the providers' file reader for the test's duration."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}

    def add(self, data: bytes, *, name: str, media_type: str) -> dict:
        sha = hashlib.sha256(data).hexdigest()
        self.data[sha] = data
        return {"type": "file", "sha256": sha, "media_type": media_type, "name": name, "size": len(data)}

    def read(self, sha256: str) -> bytes:
        if sha256 not in self.data:
            raise provider_files.FileUnavailable(f"no stored bytes for {sha256[:12]}")
        return self.data[sha256]


@contextmanager
def registered_store():
    store = FileStore()
    previous = provider_files._reader
    provider_files.register_file_reader(store.read)
    try:
        yield store
    finally:
        provider_files._reader = previous
