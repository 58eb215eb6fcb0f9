"""What the owner sees of provenance: the chat snapshot's memory marks (Saved N memories, what an Undo took back,
what a left version saved), the Memory history pages (plain words, diffs, restore, filters) and the admin columns."""

from __future__ import annotations

import pytest
from django.test import Client

from chat.services import chat_message_edit, chat_message_regenerate, chat_message_send
from memory.diff import word_diff
from memory.models import MemoryItem, MemoryItemHistory
from tests.chat.helpers import chat_workflow

pytestmark = pytest.mark.django_db(transaction=True)


def _send(workflow, text):
    message, run, _ = chat_message_send(workflow=workflow, text=text)
    run.refresh_from_db()
    return message, run


@pytest.fixture
def page_client(owner):
    client = Client()
    client.force_login(owner)
    return client


def _thread(owner_client, workflow):
    response = owner_client.get(f"/api/workflows/{workflow.pk}/chat/")
    assert response.status_code == 200, response.content
    return response.json()


def test_costs_read_as_money():
    from conversations.estimates import usd

    assert (usd(0.0032), usd(0.0000123), usd(None), usd(0)) == ("$0.0032", "$0.000012", "unknown", "$0.0000")


def test_word_diff_marks_only_the_changed_words():
    before, after = word_diff("my cat is Tom and he is grey", "my cat is Tim and he is grey")
    assert before == [("same", "my cat is "), ("del", "Tom"), ("same", " and he is grey")]
    assert after == [("same", "my cat is "), ("ins", "Tim"), ("same", " and he is grey")]
    assert word_diff("", "new") == ([], [("ins", "new")])


def test_the_snapshot_marks_what_an_answer_saved_and_what_its_undo_took_back(owner, owner_client, inline):
    workflow, _, ids = chat_workflow(owner, memory=True)
    _, run = _send(workflow, "remember: my cat is Tom")
    mark = _thread(owner_client, workflow)["memory"]["runs"][str(run.pk)]
    (item,) = mark["items"]
    assert mark["saved"] == 1 and mark["can_undo"] and item["kept"] and item["node_id"] == ids["mem"]
    assert item["agent_name"] == "Lead" and item["prompt_excerpt"] == "remember: my cat is Tom"
    assert item["content"] == "my cat is Tom"

    owner_client.post(f"/api/workflows/{workflow.pk}/chat/runs/{run.pk}/memory/undo/")
    mark = _thread(owner_client, workflow)["memory"]["runs"][str(run.pk)]
    # The forget removed the item's earlier rows; the undo's own row is what says what happened.
    assert mark["items"] == [] and mark["undone"]["forgotten"] == 1 and not mark["can_undo"]


def test_an_answer_that_saved_nothing_has_no_mark(owner, owner_client, inline):
    workflow, _, _ = chat_workflow(owner, memory=True)
    _, run = _send(workflow, "hello")
    assert str(run.pk) not in _thread(owner_client, workflow)["memory"]["runs"]


def test_after_an_edit_the_new_version_says_what_the_left_one_saved_and_forget_takes_only_that(
    owner, owner_client, inline
):
    workflow, _, _ = chat_workflow(owner, memory=True)
    _send(workflow, "remember: keep this one")
    message, _ = _send(workflow, "remember: the old branch saved this")
    chat_message_edit(workflow=workflow, message_id=message.pk, text="never mind")
    thread = _thread(owner_client, workflow)
    edited = thread["messages"][-2]
    assert edited["text"] == "never mind"
    (left,) = thread["memory"]["left"][str(edited["id"])]
    assert left["message_id"] == message.pk and left["kept"] == 1 and left["version"] == 1
    assert left["items"][0]["content"] == "the old branch saved this"

    owner_client.post(f"/api/workflows/{workflow.pk}/chat/messages/{message.pk}/branch-memory/")
    thread = _thread(owner_client, workflow)
    (left,) = thread["memory"]["left"][str(edited["id"])]
    assert left["kept"] == 0 and left["forgotten"] == 1
    assert list(MemoryItem.objects.values_list("content", flat=True)) == ["keep this one"]


def test_try_again_leaves_an_answer_whose_memories_can_be_forgotten(owner, owner_client, inline):
    workflow, _, _ = chat_workflow(owner, memory=True)
    _send(workflow, "remember: first try saved this")
    thread = _thread(owner_client, workflow)
    old_answer = thread["messages"][-1]
    chat_message_regenerate(workflow=workflow, message_id=old_answer["id"])
    thread = _thread(owner_client, workflow)
    new_answer = thread["messages"][-1]
    assert new_answer["id"] != old_answer["id"]
    # The retry saved the same fact again: the left answer's item is the first one.
    first = MemoryItem.objects.order_by("id").first()
    (left,) = thread["memory"]["left"][str(new_answer["id"])]
    assert left["role"] == "assistant" and [i["item_id"] for i in left["items"]] == [first.pk]
    url = f"/api/workflows/{workflow.pk}/chat/messages/{old_answer['id']}/branch-memory/"
    assert [w["item_id"] for w in owner_client.get(url).json()["writes"]] == [first.pk]
    assert owner_client.post(url).json()["forgotten"] == [first.pk]
    assert not MemoryItem.objects.filter(pk=first.pk).exists() and MemoryItem.objects.count() == 1


def test_history_page_says_where_each_version_came_from_and_filters_by_answer(owner, page_client, inline):
    workflow, _, ids = chat_workflow(owner, memory=True)
    _, kept_run = _send(workflow, "remember: my dog is Rex")
    _, run = _send(workflow, "remember: my cat is Tom")
    base = f"/workflows/{workflow.pk}/memory/{ids['mem']}/history/"
    page = page_client.get(base).content.decode()
    assert "Saved by Lead while answering “remember: my cat is Tom”" in page
    assert f"/workflows/{workflow.pk}/chat/#run-{run.pk}" in page

    assert page_client.post(f"/api/workflows/{workflow.pk}/chat/runs/{run.pk}/memory/undo/").status_code == 200
    one_answer = page_client.get(base, {"chat_run": run.pk}).content.decode()
    assert "Forgotten by you: Undo of what an answer saved" in one_answer
    assert "my dog is Rex" not in one_answer and "what it said is not kept" in one_answer
    by_agent = page_client.get(base, {"agent": ids["lead"]}).content.decode()
    assert "my dog is Rex" in by_agent and "What Lead wrote" in by_agent
    assert "my dog is Rex" in page_client.get(base, {"chat": "1"}).content.decode()
    # The other answer's memory is untouched, and its filter does not show the undone one.
    assert MemoryItem.objects.get().content == "my dog is Rex"
    other = page_client.get(base, {"chat_run": kept_run.pk}).content.decode()
    assert "my dog is Rex" in other and "Undo of what an answer saved" not in other


def test_item_history_shows_versions_side_by_side_and_restores_with_a_version_check(
    owner, owner_client, page_client, inline
):
    workflow, _, ids = chat_workflow(owner, memory=True)
    _send(workflow, "remember: my cat is Tom")
    item = MemoryItem.objects.get()
    api = f"/api/workflows/{workflow.pk}/memory/{ids['mem']}/items/{item.pk}/"
    owner_client.patch(api, {"expected_version": 1, "content": "my cat is Tim"}, format="json")
    url = f"/workflows/{workflow.pk}/memory/{ids['mem']}/items/{item.pk}/history/"
    page = page_client.get(url).content.decode()
    assert "<del>Tom</del>" in page and "<ins>Tim</ins>" in page
    assert "Changed by you through the API" in page and "Saved by Lead" in page
    assert page.count("Restore this version") == 1  # only version 1: version 2 is the current one

    restore = f"/workflows/{workflow.pk}/memory/{ids['mem']}/items/{item.pk}/restore/"
    response = page_client.post(restore, {"version": 1, "expected_version": 2}, follow=True)
    assert "Version 1 restored: it is now version 3." in response.content.decode()
    item.refresh_from_db()
    assert (item.content, item.version) == ("my cat is Tom", 3)
    row = MemoryItemHistory.objects.filter(item_id=item.pk).order_by("-id").first()
    assert row.source == "owner" and row.detail["restored_version"] == 1
    assert "Changed by you: version 1 restored" in response.content.decode()

    stale = page_client.post(restore, {"version": 2, "expected_version": 2})
    assert stale.status_code == 302 and stale["Location"].endswith("#version-2")  # back where the owner was
    said = page_client.get(stale["Location"]).content.decode()
    assert "Not restored: this memory changed while you were looking (it is now version 3)" in said
    item.refresh_from_db()
    assert item.version == 3


def test_history_pages_are_the_owners_only(owner, other_owner, inline):
    workflow, _, ids = chat_workflow(owner, memory=True)
    _send(workflow, "remember: private")
    item = MemoryItem.objects.get()
    intruder = Client()
    intruder.force_login(other_owner)
    base = f"/workflows/{workflow.pk}/memory/{ids['mem']}/"
    assert intruder.get(base + "history/").status_code == 404
    assert intruder.get(base + f"items/{item.pk}/history/").status_code == 404
    response = intruder.post(base + f"items/{item.pk}/restore/", {"version": 1, "expected_version": 1})
    assert response.status_code == 404
    assert MemoryItem.objects.get().version == 1


def test_the_panel_links_each_item_to_its_history(owner, page_client, inline):
    workflow, _, ids = chat_workflow(owner, memory=True)
    _send(workflow, "remember: my cat is Tom")
    item = MemoryItem.objects.get()
    page = page_client.get(f"/workflows/{workflow.pk}/memory/{ids['mem']}/").content.decode()
    assert f"/workflows/{workflow.pk}/memory/{ids['mem']}/items/{item.pk}/history/" in page
    assert f"/workflows/{workflow.pk}/memory/{ids['mem']}/history/" in page
    assert "Saved by Lead while answering “remember: my cat is Tom”" in page
    assert f"/workflows/{workflow.pk}/chat/#run-" in page


def test_admin_shows_provenance_read_only(owner, make_user, inline):
    workflow, _, ids = chat_workflow(owner, memory=True)
    _, run = _send(workflow, "remember: my cat is Tom")
    item = MemoryItem.objects.get()
    staff = make_user("staffer", is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(staff)
    page = client.get(f"/admin/memory/memoryitem/{item.pk}/change/").content.decode()
    assert "Source" in page and "Chat run id" in page and str(run.pk) in page and str(run.firing_id) in page
    history = client.get("/admin/memory/memoryitemhistory/", {"source": "agent"}).content.decode()
    assert ids["lead"] in history and str(run.pk) in history
    row = MemoryItemHistory.objects.get()
    assert client.get(f"/admin/memory/memoryitemhistory/{row.pk}/change/").status_code == 200
    assert client.post(f"/admin/memory/memoryitemhistory/{row.pk}/delete/", {"post": "yes"}).status_code == 403
    assert MemoryItemHistory.objects.filter(pk=row.pk).exists()


def test_the_context_panel_shows_the_next_turns_expected_cost_from_the_same_estimate(
    owner, owner_client, page_client, inline
):
    workflow, _, _ = chat_workflow(owner, memory=True)
    _, run = _send(workflow, "remember: my cat is Tom")
    view = owner_client.get(f"/api/workflows/{workflow.pk}/chat/runs/{run.pk}/request/").json()
    estimate = view["next_turn"]
    assert estimate["estimated"] and estimate["input_tokens_estimate"] > 0
    response = page_client.get(f"/workflows/{workflow.pk}/context/")
    page = response.content.decode()
    # The panel gives one count: the one the gauge shows (counted at the last answer), not a second estimate.
    measured = response.context["pressure"]["input_tokens"]
    assert 'id="ctx-next-turn"' in page and f"those {measured} tokens again" in page
    assert "An estimate" not in page
    # The offline model is free: said in words rather than "$0.0000".
    assert estimate["cost"] == 0 and "nothing (the offline model is free)" in page


def test_opening_the_history_pages_creates_no_namespace(owner, page_client):
    from memory.models import MemoryNamespace

    workflow, _, ids = chat_workflow(owner, memory=True, start=False)
    base = f"/workflows/{workflow.pk}/memory/{ids['mem']}/"
    page = page_client.get(base + "history/")
    assert page.status_code == 200 and "Nothing here" in page.content.decode()
    assert page_client.get(base + "items/1/history/").status_code == 404
    assert page_client.post(base + "items/1/restore/", {"version": 1, "expected_version": 1}).status_code == 404
    assert not MemoryNamespace.objects.exists()
