"""A file's type comes from its bytes; a name or claim that disagrees is refused, and names are made safe."""

from __future__ import annotations

import pytest

from files.names import sanitize_name
from files.sniffing import FileRefused, sniff_media_type
from tests.files.samples import JPEG, gif, pdf, png, webp


@pytest.mark.parametrize(
    ("data", "name", "claimed", "expected"),
    [
        (png(), "shot.png", "image/png", "image/png"),
        (png(), "shot", "", "image/png"),  # no extension: the bytes decide
        (png(), "clipboard.bin", "application/octet-stream", "image/png"),
        (JPEG, "photo.jpeg", "image/jpeg", "image/jpeg"),
        (gif(), "dance.gif", "", "image/gif"),
        (webp(), "pic.webp", "image/webp", "image/webp"),
        (pdf(2), "report.pdf", "application/pdf", "application/pdf"),
        (b"# Title\n\nSome *words*.", "notes.md", "text/markdown", "text/markdown"),
        (b"a,b\n1,2\n", "table.csv", "application/vnd.ms-excel", "text/csv"),
        (b'{"a": [1, 2]}', "data.json", "application/json", "application/json"),
        ("caf\u00e9 \u2603\n".encode(), "plain.txt", "text/plain", "text/plain"),
        (b"no extension at all", "README", "", "text/plain"),
    ],
)
def test_the_type_is_read_from_the_bytes(data, name, claimed, expected):
    assert sniff_media_type(data, name=name, claimed=claimed) == expected


@pytest.mark.parametrize(
    ("data", "name", "claimed", "code"),
    [
        (JPEG, "photo.png", "", "file_type_mismatch"),  # named PNG, bytes JPEG
        (pdf(1), "cat.png", "image/png", "file_type_mismatch"),
        (png(), "scan.pdf", "", "file_type_mismatch"),
        (png(), "shot.png", "application/pdf", "file_type_mismatch"),  # the browser's claim lies
        (b"just text", "image.png", "", "file_type_mismatch"),
        (b"just text", "notes.txt", "image/jpeg", "file_type_mismatch"),
        (b"{not json", "data.json", "", "file_type_mismatch"),
        (b"<svg xmlns='http://www.w3.org/2000/svg'><script>alert(1)</script></svg>", "x.txt", "", "file_type_refused"),
        (b"<!DOCTYPE html><html><body>hi</body></html>", "page.md", "", "file_type_refused"),
        (b"<svg/>", "logo.svg", "image/svg+xml", "file_type_mismatch"),
        (b"plain words", "page.html", "", "file_type_refused"),
        (b"MZ\x90\x00\x03\x00\x00\x00\x04\x00\xff\xff", "tool.exe", "", "file_type_refused"),
        (b"\x00\x01\x02binary", "blob", "", "file_type_refused"),
        (png()[:-6], "cut.png", "", "file_truncated"),  # the upload stopped before IEND
        (pdf(1)[:-40], "cut.pdf", "", "file_truncated"),
        (b"", "empty.txt", "", "file_empty"),
    ],
)
def test_a_file_of_a_refused_type_or_lying_about_it_is_refused_by_name(data, name, claimed, code):
    with pytest.raises(FileRefused) as refused:
        sniff_media_type(data, name=name, claimed=claimed)
    assert refused.value.code == code
    assert name in refused.value.message and refused.value.extra == {"file": name}


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("../../etc/passwd", "passwd"),
        ("C:\\Users\\me\\shot.png", "shot.png"),
        ("  .hidden.txt ", "hidden.txt"),
        ("a\x00b\nc.txt", "abc.txt"),  # control characters go
        ("invoice\u202egnp.exe", "invoicegnp.exe"),  # a bidi override cannot disguise the extension
        ('what?<is>|this:"*.md', "what__is__this___.md"),
        ("", "file"),
        ("...", "file"),
        ("x" * 300 + ".png", "x" * 116 + ".png"),
    ],
)
def test_names_are_sanitised(raw, expected):
    assert sanitize_name(raw) == expected
