"""Upload and download through the API, the chat's send and edit naming uploaded files, and what never leaks."""

from __future__ import annotations

import json
import logging

import pytest
from django.core.cache import cache
from django.core.files.uploadedfile import SimpleUploadedFile

from chat.models import ChatMessage
from files.models import StoredFile
from tests.chat.helpers import chat_workflow, stored
from tests.files.helpers import stored_objects
from tests.files.samples import pdf, png

pytestmark = pytest.mark.django_db(transaction=True)

SECRET_LINE = "the launch code is TANGO-7741-SIERRA"


def upload(client, name: str, data: bytes, content_type: str = "", **headers):
    document = SimpleUploadedFile(name, data, content_type=content_type or "application/octet-stream")
    return client.post("/api/files/", {"file": document}, format="multipart", **headers)


def test_an_upload_answers_its_id_and_type_and_the_owner_alone_downloads_it(
    owner_client, other_client, api_client, file_storage_dir
):
    image = png(16, 16)
    answer = upload(owner_client, "../../Screen shot.png", image, "image/png")
    assert answer.status_code == 201, answer.json()
    body = answer.json()
    assert body["name"] == "Screen shot.png" and body["media_type"] == "image/png" and body["size"] == len(image)
    assert body["url"] == f"/api/files/{body['id']}/"

    download = owner_client.get(body["url"])
    assert download.status_code == 200 and b"".join(download.streaming_content) == image
    assert download["Content-Disposition"] == 'attachment; filename="Screen shot.png"'
    assert download["X-Content-Type-Options"] == "nosniff"
    assert download["Content-Type"] == "image/png"
    assert "sandbox" in download["Content-Security-Policy"]

    theirs = other_client.get(body["url"])
    assert theirs.status_code == 404 and theirs.json()["code"] == "not_found"
    assert other_client.get("/api/files/999999/").json() == theirs.json()  # exactly like a missing id
    api_client.force_authenticate(None)
    assert api_client.get(body["url"]).status_code == 401


def test_a_text_file_downloads_as_an_attachment_never_as_a_page(owner_client):
    answer = upload(owner_client, "notes.md", b"# hi\n\n<b>bold</b>\n", "text/markdown")
    download = owner_client.get(answer.json()["url"])
    assert download["Content-Type"] == "text/markdown"
    assert download["Content-Disposition"].startswith("attachment;")
    assert download["X-Content-Type-Options"] == "nosniff"


def test_a_refused_upload_says_which_file_and_why_and_stores_nothing(owner_client, settings, file_storage_dir):
    lying = upload(owner_client, "cat.png", pdf(1), "image/png")
    assert lying.status_code == 400
    assert lying.json()["code"] == "file_type_mismatch" and lying.json()["file"] == "cat.png"
    assert "cat.png" in lying.json()["message"]
    svg = upload(owner_client, "logo.svg", b"<svg xmlns='http://www.w3.org/2000/svg'/>", "image/svg+xml")
    assert svg.status_code == 400 and svg.json()["file"] == "logo.svg"
    settings.FILE_MAX_BYTES = 1024
    big = upload(owner_client, "big.png", png(30, 30), "image/png")
    assert big.status_code == 413 and big.json()["code"] == "file_too_large"
    assert not StoredFile.objects.exists() and stored_objects(file_storage_dir) == []


def test_an_upload_may_be_larger_than_other_requests_but_not_than_a_file(owner_client, settings):
    settings.REQUEST_MAX_BYTES = 64 * 1024
    settings.FILE_MAX_BYTES = 256 * 1024
    settings.REQUEST_MAX_BYTES_BY_PATH = {"/api/files/": settings.FILE_MAX_BYTES + 64 * 1024}
    image = png(200, 200)
    assert 64 * 1024 < len(image) < 256 * 1024
    assert upload(owner_client, "wide.png", image, "image/png").status_code == 201
    elsewhere = owner_client.post("/api/workflows/", {"name": "x" * 100_000}, format="json")
    assert elsewhere.status_code == 413 and elsewhere.json()["code"] == "request_too_large"
    too_big = upload(owner_client, "huge.png", png(350, 350), "image/png")  # past the upload's own limit
    assert too_big.status_code == 413 and too_big.json()["code"] == "request_too_large"


def test_an_idempotency_key_replays_the_upload(owner_client):
    first = upload(owner_client, "a.png", png(), "image/png", HTTP_IDEMPOTENCY_KEY="upload-1")
    again = upload(owner_client, "a.png", png(), "image/png", HTTP_IDEMPOTENCY_KEY="upload-1")
    assert first.status_code == again.status_code == 201
    assert again["Idempotency-Replayed"] == "true" and again.json()["id"] == first.json()["id"]
    assert StoredFile.objects.count() == 1
    # The key names that upload: other bytes under the same name are another request.
    other = upload(owner_client, "a.png", png(seed=2), "image/png", HTTP_IDEMPOTENCY_KEY="upload-1")
    assert other.status_code == 409 and other.json()["code"] == "idempotency_key_reused"


def test_uploads_are_throttled(owner_client, settings):
    cache.clear()
    settings.THROTTLE_RATES = {**settings.THROTTLE_RATES, "file_upload": "2/minute"}
    codes = [upload(owner_client, f"{n}.png", png(seed=n), "image/png").status_code for n in range(3)]
    assert codes == [201, 201, 429]


def test_send_and_edit_carry_the_files_and_the_thread_shows_them(owner, owner_client, other_client, inline):
    workflow, generation, ids = chat_workflow(owner)
    url = f"/api/workflows/{workflow.pk}/chat/"
    image = upload(owner_client, "shot.png", png(40, 40), "image/png").json()
    document = upload(owner_client, "report.pdf", pdf(2), "application/pdf").json()
    theirs = upload(other_client, "theirs.png", png(seed=5), "image/png").json()

    refused = owner_client.post(url + "messages/", {"text": "hi", "file_ids": [image["id"], theirs["id"]]})
    assert refused.status_code == 404 and refused.json()["code"] == "file_not_found"
    assert not ChatMessage.objects.exists()  # not sent half-attached

    sent = owner_client.post(url + "messages/", {"text": "see these", "file_ids": [image["id"], document["id"]]})
    assert sent.status_code == 201, sent.json()
    thread = owner_client.get(url).json()
    mine, answer = thread["messages"]
    assert [(f["name"], f["is_image"], f["url"]) for f in mine["files"]] == [
        ("shot.png", True, image["url"]),
        ("report.pdf", False, document["url"]),
    ]
    assert "I received 1 image, 5 KB; 1 PDF, 2 pages." in answer["text"]

    edited = owner_client.post(url + f"messages/{mine['id']}/edit/", {"text": "see these again"})
    assert edited.status_code == 201, edited.json()
    thread = owner_client.get(url).json()
    assert thread["messages"][0]["text"] == "see these again"
    assert [f["name"] for f in thread["messages"][0]["files"]] == ["shot.png", "report.pdf"]
    assert "I received 1 image, 5 KB; 1 PDF, 2 pages." in thread["messages"][1]["text"]
    user_turns = [m for m in stored(workflow, generation, ids["lead"]) if m["role"] == "user"]
    assert [b["name"] for b in user_turns[-1]["blocks"] if b["type"] == "file"] == ["shot.png", "report.pdf"]
    again = owner_client.post(url + f"messages/{thread['messages'][1]['id']}/regenerate/", {})
    assert again.status_code == 201, again.json()  # Try again answers the same message, files and all
    thread = owner_client.get(url).json()
    assert thread["messages"][1]["siblings"]["count"] == 2
    assert "I received 1 image, 5 KB; 1 PDF, 2 pages." in thread["messages"][1]["text"]

    dropped = owner_client.post(
        url + f"messages/{thread['messages'][0]['id']}/edit/", {"text": "no files now", "file_ids": []}
    )
    assert dropped.status_code == 201
    assert owner_client.get(url).json()["messages"][0]["files"] == []


def test_nothing_of_a_files_content_reaches_logs_or_events(owner, owner_client, inline, caplog, capture_events):
    workflow, _, _ = chat_workflow(owner)
    caplog.set_level(logging.DEBUG)
    secret = upload(owner_client, "secret.txt", SECRET_LINE.encode(), "text/plain").json()
    url = f"/api/workflows/{workflow.pk}/chat/messages/"
    sent = owner_client.post(url, {"text": "read it", "file_ids": [secret["id"]]})
    assert sent.status_code == 201
    assert any(r.getMessage() == "file stored" for r in caplog.records)  # the upload was logged, as metadata
    logged = caplog.text + json.dumps([r.__dict__ for r in caplog.records], default=str)
    assert "TANGO-7741" not in logged
    assert capture_events.sent and "TANGO-7741" not in json.dumps([e.event for e in capture_events.sent])
