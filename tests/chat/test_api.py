"""REST handlers mirror the page: ownership (404), refusals as codes, idempotent send, the schema."""

from __future__ import annotations

import pytest

from tests.chat.helpers import chat_workflow

pytestmark = pytest.mark.django_db(transaction=True)


def base(workflow) -> str:
    return f"/api/workflows/{workflow.pk}/chat/"


def test_send_edit_switch_regenerate_feedback_and_clear_through_rest(owner, owner_client, inline):
    workflow, _, _ = chat_workflow(owner)
    url = base(workflow)
    sent = owner_client.post(url + "messages/", {"text": "one", "client_message_id": "a1"}, format="json")
    assert sent.status_code == 201, sent.json()
    replay = owner_client.post(url + "messages/", {"text": "one", "client_message_id": "a1"}, format="json")
    assert replay.status_code == 200 and replay.json()["created"] is False
    assert replay.json()["run"]["id"] == sent.json()["run"]["id"]
    owner_client.post(url + "messages/", {"text": "two"}, format="json")
    thread = owner_client.get(url).json()
    assert [m["role"] for m in thread["messages"]] == ["user", "assistant", "user", "assistant"]
    assert thread["messages"][1]["run"]["state"] == "finished"
    second = thread["messages"][2]["id"]

    edited = owner_client.post(
        url + f"messages/{second}/edit/", {"text": "TWO", "expected_revision": thread["revision"]}, format="json"
    )
    assert edited.status_code == 201, edited.json()
    thread = owner_client.get(url).json()
    assert thread["messages"][2]["text"] == "TWO" and thread["messages"][2]["siblings"]["count"] == 2

    stale = owner_client.post(url + f"messages/{second}/switch/", {"expected_revision": 1}, format="json")
    assert stale.status_code == 409 and stale.json()["code"] == "revision_conflict"
    switched = owner_client.post(url + f"messages/{second}/switch/", {"expected_revision": thread["revision"]})
    assert switched.status_code == 200 and switched.json()["messages"][2]["text"] == "two"

    latest = switched.json()["messages"][-1]["id"]
    again = owner_client.post(url + f"messages/{latest}/regenerate/", {}, format="json")
    assert again.status_code == 201 and again.json()["kind"] == "regenerate"
    run = owner_client.get(url + f"runs/{again.json()['id']}/").json()
    assert run["state"] == "finished"

    rated = owner_client.post(url + f"messages/{run['reply_message_id']}/feedback/", {"rating": "good"}, format="json")
    assert rated.status_code == 200 and rated.json()["rating"] == "good"
    bad = owner_client.post(url + f"messages/{run['reply_message_id']}/feedback/", {"rating": "meh"}, format="json")
    assert bad.status_code == 400 and bad.json()["code"] == "invalid_request"

    stop = owner_client.post(url + f"runs/{run['id']}/stop/")
    assert stop.status_code == 200 and stop.json()["state"] == "finished"  # stopping an ended run changes nothing

    cleared = owner_client.post(url + "clear/")
    assert cleared.status_code == 200 and cleared.json()["conversations"] == 1
    assert owner_client.get(url).json()["messages"] == []


def test_another_owners_chat_answers_404_everywhere(owner, owner_client, other_client, inline):
    workflow, _, _ = chat_workflow(owner)
    url = base(workflow)
    sent = owner_client.post(url + "messages/", {"text": "mine"}, format="json").json()
    message, run = sent["message_id"], sent["run"]["id"]
    calls = [
        ("get", url, None),
        ("post", url + "messages/", {"text": "x"}),
        ("post", url + f"messages/{message}/edit/", {"text": "x"}),
        ("post", url + f"messages/{message}/regenerate/", {}),
        ("post", url + f"messages/{message}/switch/", {}),
        ("post", url + f"messages/{message}/feedback/", {"rating": "bad"}),
        ("get", url + f"runs/{run}/", None),
        ("post", url + f"runs/{run}/stop/", None),
        ("post", url + "clear/", None),
    ]
    for method, path, body in calls:
        response = (
            getattr(other_client, method)(path, body, format="json")
            if body is not None
            else getattr(other_client, method)(path)
        )
        assert response.status_code == 404, (path, response.status_code)
        assert response.json()["code"] == "not_found"


def test_refusals_come_back_as_codes_with_plain_words(owner, owner_client, inline):
    workflow, _, _ = chat_workflow(owner)
    url = base(workflow)
    empty = owner_client.post(url + "messages/", {"text": "  "}, format="json")
    assert empty.status_code == 400 and empty.json()["code"] == "invalid_request"
    missing = owner_client.post(url + "messages/999999/edit/", {"text": "x"}, format="json")
    assert missing.status_code == 404 and missing.json()["code"] == "not_found"
    owner_client.post(url + "messages/", {"text": "hi"}, format="json")
    answer = owner_client.get(url).json()["messages"][1]["id"]
    not_editable = owner_client.post(url + f"messages/{answer}/edit/", {"text": "x"}, format="json")
    assert not_editable.status_code == 400 and not_editable.json()["code"] == "not_editable"
    assert not_editable.json()["message"]


def test_the_schema_documents_the_chat_handlers(owner_client):
    schema = owner_client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    operations = {op["operationId"] for path in schema["paths"].values() for op in path.values() if "operationId" in op}
    assert {
        "chat_thread",
        "chat_message_send",
        "chat_message_edit",
        "chat_message_regenerate",
        "chat_message_switch",
        "chat_message_feedback",
        "chat_run_get",
        "chat_run_stop",
        "chat_clear",
    } <= operations


def test_the_page_renders_for_the_owner_and_404s_for_others(owner, other_owner, client, inline):
    workflow, _, _ = chat_workflow(owner, memory=True)
    client.force_login(other_owner)
    assert client.get(f"/workflows/{workflow.pk}/chat/").status_code == 404
    client.force_login(owner)
    page = client.get(f"/workflows/{workflow.pk}/chat/")
    assert page.status_code == 200
    html = page.content.decode()
    assert f"/workflows/{workflow.pk}/context/" in html and f"/workflows/{workflow.pk}/memory/" in html
    assert 'id="chat-thread"' in html and 'for="composer"' in html
