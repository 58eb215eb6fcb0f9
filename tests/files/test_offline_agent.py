"""The offline agent says what files reached it with the owner's message, reading a PDF's pages by hash."""

from __future__ import annotations

import hashlib

import pytest

from files.services import file_upload
from providers.adapters.offline import plan_reply
from providers.types import ChatRequest
from providers.wire import text_block
from tests.files.samples import pdf


def asked(*blocks) -> str:
    message = {"role": "user", "blocks": [text_block("what is this?"), *blocks]}
    return plan_reply(ChatRequest(provider="offline", model="offline-1", messages=[message]))[0]


def block(media_type: str, size: int, sha256: str = "0" * 64, name: str = "f") -> dict:
    return {"type": "file", "sha256": sha256, "media_type": media_type, "name": name, "size": size}


@pytest.mark.django_db
def test_it_counts_images_by_size_and_pdfs_by_pages(owner):
    document = file_upload(owner=owner, name="report.pdf", data=pdf(3))
    reply = asked(block("image/png", 34 * 1024), block("application/pdf", document.size, document.sha256))
    assert reply.startswith("I received 1 image, 34 KB; 1 PDF, 3 pages. ")
    assert reply.endswith("You said: what is this?")
    two = asked(block("image/png", 1000), block("image/jpeg", 3000), block("text/csv", 2048), block("text/plain", 10))
    assert two.startswith("I received 2 images, 4 KB; 2 documents, 2 KB. ")


@pytest.mark.django_db
def test_a_pdf_whose_bytes_are_gone_is_still_named(owner):
    gone = hashlib.sha256(pdf(1)).hexdigest()
    assert asked(block("application/pdf", 900, gone)).startswith("I received 1 PDF, pages unknown. ")


def test_a_message_without_files_is_answered_as_before():
    assert asked() == "I see 0 earlier messages. You said: what is this?"
