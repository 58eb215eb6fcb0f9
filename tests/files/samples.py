"""Real files for the upload tests and the bench: a PNG of any size (noise, so it neither compresses nor repeats
between seeds), a JPEG-shaped file and a WebP container; the PDF and GIF are the providers tests' own
(tests/file_samples.py)."""

from __future__ import annotations

import random
import struct
import zlib

from tests.file_samples import gif, pdf

__all__ = ["JPEG", "gif", "pdf", "png", "png_of_size", "webp"]


def png(width: int = 4, height: int = 4, *, seed: int = 1) -> bytes:
    rng = random.Random(seed)
    rows = b"".join(b"\x00" + bytes(rng.getrandbits(8) for _ in range(width * 3)) for _ in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows, 0)) + chunk(b"IEND", b"")


def png_of_size(size: int, *, seed: int = 1) -> bytes:
    """A PNG of about `size` bytes (a square of noise, stored uncompressed)."""
    side = max(1, int((size / 3) ** 0.5))
    return png(side, side, seed=seed)


JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00" + b"\x00" * 32 + b"\xff\xd9"


def webp() -> bytes:
    body = b"WEBP" + b"VP8L" + struct.pack("<I", 6) + b"\x2f\x00\x00\x00\x00\x00"
    return b"RIFF" + struct.pack("<I", len(body)) + body
