"""Notes are for the agent only (issue 15): the offline agent never echoes them, a run whose turn was saved (a
stopped one too) marks its notes told, and notes from a branch the owner left or from before a Clear context are
not offered."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from agents.models import Firing
from agents.services.messages import firing_messages
from chat.models import ChatMarker, ChatNote, ChatRun
from chat.run_stream import run_stream_state
from chat.selectors import chat_thread
from chat.services import chat_feedback_set, chat_message_edit, chat_message_send, chat_run_stop
from tests.chat.helpers import chat_workflow, stored, texts, wait_until

pytestmark = pytest.mark.django_db(transaction=True)

LONG = " ".join(f"word{i}" for i in range(200))


def send(workflow, text):
    message, run, _ = chat_message_send(workflow=workflow, text=text)
    run.refresh_from_db()
    return message, run


def sent_user_text(run: ChatRun) -> str:
    """The user message the answering agent was sent for `run` (notes included)."""
    messages = firing_messages(Firing.objects.get(pk=run.firing_id))
    user = [m for m in messages if m["role"] == "user"][-1]
    return "".join(b.get("text", "") for b in user["blocks"] if b["type"] == "text")


def two_turns(owner):
    workflow, generation, ids = chat_workflow(owner)
    first, first_run = send(workflow, "one")
    second, second_run = send(workflow, "two")
    return workflow, generation, ids["lead"], (first, first_run), (second, second_run)


def test_after_a_rating_the_next_answer_reports_the_note_in_its_own_words(owner, inline):
    workflow, _, _, _, (_, rated) = two_turns(owner)
    chat_feedback_set(workflow=workflow, message_id=rated.reply_message_id, rating="good")
    _, third = send(workflow, "three")
    assert sent_user_text(third).startswith("[feedback]{")  # the agent hears it
    answer = third.reply_message.text
    assert answer == "(1 note from OpenCompany: feedback.) I see 4 earlier messages. You said: three"
    assert "[feedback]" not in answer and "rating" not in answer
    assert ChatNote.objects.get().told_at is not None


def test_a_rating_note_quotes_the_rated_answer_up_to_the_feedback_limit(owner, inline, monkeypatch):
    import json

    from chat.services import feedback

    workflow, _, _, _, (_, rated) = two_turns(owner)
    answer = rated.reply_message.text
    limit = 12  # the one named limit decides the quote's length, shorter than the answer
    assert len(answer) > limit
    monkeypatch.setattr(feedback, "FEEDBACK_ANSWER_CHARS", limit)
    chat_feedback_set(workflow=workflow, message_id=rated.reply_message_id, rating="bad")
    text = ChatNote.objects.get(key=f"feedback:{rated.reply_message_id}").text
    payload = json.loads(text.removeprefix("[feedback]").removesuffix("[/feedback]"))
    assert payload == {"rating": "bad", "answer": answer[:limit] + "…"}


def test_a_stopped_run_whose_turn_was_saved_marks_its_notes_told(owner, inline, settings):
    settings.OFFLINE_PROVIDER_DELAY_MS = 30
    settings.AGENT_STOP_POLL_SECONDS = 0.02
    workflow, generation, agent, _, (_, rated) = two_turns(owner)
    chat_feedback_set(workflow=workflow, message_id=rated.reply_message_id, rating="bad")
    box = {}

    def sender():
        try:
            box["run"] = chat_message_send(workflow=workflow, text=LONG)[1]
        finally:
            connection.close()

    thread = threading.Thread(target=sender)
    thread.start()
    run_id = wait_until(
        lambda: ChatRun.objects.filter(state="running").values_list("pk", flat=True).first(), what="the run"
    )
    wait_until(lambda: len(run_stream_state(run_id)[1]) > 20, what="streamed text")
    chat_run_stop(workflow=workflow, run_id=run_id)
    thread.join(timeout=60)
    stopped = ChatRun.objects.get(pk=run_id)
    assert stopped.state == "stopped" and stopped.reply_message.status == "stopped"
    # The turn was saved with the note ahead of the owner's words: the agent has heard it.
    saved_user = [m for m in stored(workflow, generation, agent) if m["role"] == "user"][-1]
    assert texts([saved_user])[0].startswith("[feedback]{")
    note = ChatNote.objects.get()
    assert note.told_at is not None and note.claimed_by_id == stopped.pk
    # So the next two turns carry no note, and their answers say nothing about one.
    settings.OFFLINE_PROVIDER_DELAY_MS = 0
    for text in ("four", "five"):
        _, run = send(workflow, text)
        assert sent_user_text(run) == text
        assert run.reply_message.text.endswith(f"You said: {text}") and "note" not in run.reply_message.text


def test_a_run_that_ended_before_its_turn_was_saved_offers_the_notes_again(owner, inline, monkeypatch, settings):
    from django.db import transaction

    from agents.services.firings import firing_end
    from agents.services.prepare import prepare_payload
    from tests.broker import hold_broker

    workflow, _, _, _, (_, rated) = two_turns(owner)
    chat_feedback_set(workflow=workflow, message_id=rated.reply_message_id, rating="bad")
    hold_broker(monkeypatch, settings)
    _, run, _ = chat_message_send(workflow=workflow, text="three")
    prepare_payload(str(run.firing_id))  # claimed, but no model call was made: nothing was saved
    chat_run_stop(workflow=workflow, run_id=run.pk)
    with transaction.atomic():
        firing = Firing.objects.select_for_update().get(pk=run.firing_id)
        firing_end(firing, state=Firing.State.STOPPED, end_reason="stopped")
    assert ChatRun.objects.get(pk=run.pk).state == "stopped"
    note = ChatNote.objects.get()
    assert note.told_at is None and note.claimed_by_id is None


def test_a_rating_on_a_branch_the_owner_left_is_not_offered(owner, inline):
    workflow, _, _, (first, first_run), (second, rated) = two_turns(owner)
    chat_feedback_set(workflow=workflow, message_id=rated.reply_message_id, rating="bad")
    # Editing the second message leaves the rated answer behind: the edit's answer must not hear of it.
    _, edit_run = chat_message_edit(workflow=workflow, message_id=second.pk, text="TWO")
    edit_run.refresh_from_db()
    assert sent_user_text(edit_run) == "TWO"
    assert edit_run.reply_message.text == "I see 2 earlier messages. You said: TWO"
    assert ChatNote.objects.get(key=f"feedback:{rated.reply_message_id}").told_at is None
    # A rating on the path that is kept (the first answer) is offered.
    chat_feedback_set(workflow=workflow, message_id=first_run.reply_message_id, rating="good")
    _, next_run = send(workflow, "three")
    assert sent_user_text(next_run).count("[feedback]") == 1
    assert f'"answer": "{first_run.reply_message.text}"' in sent_user_text(next_run)


def test_notes_from_before_a_clear_context_are_dropped_and_the_thread_is_marked(owner, inline, client):
    workflow, generation, agent, _, (second, rated) = two_turns(owner)
    chat_feedback_set(workflow=workflow, message_id=rated.reply_message_id, rating="bad")
    from conversations.selectors import live_context_targets

    client.force_login(owner)
    node = live_context_targets(workflow)[0].context_node_id
    response = client.post(f"/workflows/{workflow.pk}/context/clear/", {"node": node})
    assert response.status_code == 302, response
    assert stored(workflow, generation, agent) == []
    assert not ChatNote.objects.exists()
    (marker,) = chat_thread(workflow=workflow)["markers"]
    assert marker["kind"] == "context_cleared" and marker["after_message_id"] == rated.reply_message_id
    _, run = send(workflow, "fresh start")
    assert sent_user_text(run) == "fresh start"
    assert run.reply_message.text == "I see 0 earlier messages. You said: fresh start"


def test_the_admins_clear_context_drops_notes_through_the_archive_listener(owner, inline):
    from workflows.outbox import archive_outbox_process
    from workflows.services import workflow_context_clear

    workflow, _, _, _, (_, rated) = two_turns(owner)
    chat_feedback_set(workflow=workflow, message_id=rated.reply_message_id, rating="good")
    row = workflow_context_clear(workflow=workflow)
    assert archive_outbox_process(row_id=row.pk)
    assert not ChatNote.objects.exists()
    assert ChatMarker.objects.filter(kind="context_cleared", after_message_id=rated.reply_message_id).count() == 1
    _, run = send(workflow, "after")
    assert run.reply_message.text == "I see 0 earlier messages. You said: after"


def test_a_compaction_is_marked_once_in_the_thread(owner, inline):
    from conversations.store import conversation_key, lock_conversations, replace_conversation_locked

    workflow, generation, agent, _, (_, second_run) = two_turns(owner)
    key = conversation_key(workflow.pk, generation, agent)
    current = stored(workflow, generation, agent)
    summary = {"role": "user", "blocks": [{"type": "text", "text": "## Compacted conversation summary\nearlier"}],
               "meta": {"compaction_summary": True}}  # fmt: skip
    with lock_conversations([key]):
        replace_conversation_locked(key, [current[0], summary, *current[-2:]], reason="compaction")
    send(workflow, "three")
    send(workflow, "four")
    (marker,) = chat_thread(workflow=workflow)["markers"]
    assert marker["kind"] == "compacted" and marker["after_message_id"] == second_run.reply_message_id
