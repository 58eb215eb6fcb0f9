"""Chat services: send, the lane, refusals, branch moves with cursors and snapshots, notes, clear, reset."""

from __future__ import annotations

import functools
import json

import pytest
from django.db import IntegrityError

from agents.models import Firing
from agents.services.messages import firing_messages
from chat.events import chat_updated_event
from chat.locks import chat_session_for_update
from chat.models import ChatBranchSnapshot, ChatMessage, ChatNote, ChatRun, ChatSession
from chat.selectors import chat_thread
from chat.services import (
    NOTES_GUIDE,
    chat_clear,
    chat_feedback_set,
    chat_message_edit,
    chat_message_regenerate,
    chat_message_send,
    chat_message_switch,
    chat_run_stop,
)
from conversations.store import conversation_key, lock_conversations, replace_conversation_locked
from core.errors import ServiceError
from tests.broker import hold_broker
from tests.chat.helpers import chat_workflow, stored, texts
from tests.race import Competitor, wait_until_waiting_on_a_lock

pytestmark = pytest.mark.django_db(transaction=True)


def refusal(excinfo) -> str:
    return excinfo.value.code


def send(workflow, text, **kw):
    message, run, _ = chat_message_send(workflow=workflow, text=text, **kw)
    run.refresh_from_db()
    return message, run


def revision(workflow) -> int:
    return ChatSession.objects.get(workflow=workflow).revision


# --- send, idempotency, the lane ------------------------------------------------------------------------------


def test_a_message_is_answered_and_the_reply_is_saved_on_the_path(owner, inline):
    workflow, generation, ids = chat_workflow(owner)
    message, run = send(workflow, "hello")
    assert run.state == "finished" and run.outcome == "answered"
    assert run.reply_message.text == "I see 0 earlier messages. You said: hello"
    assert run.reply_message.status == "complete" and run.reply_message.parent_id == message.pk
    thread = chat_thread(workflow=workflow)
    assert [m["role"] for m in thread["messages"]] == ["user", "assistant"]
    assert thread["active_run"] is None
    # The stored system prompt ends with the byte-stable guide.
    assert stored(workflow, generation, ids["lead"])[0]["blocks"][0]["text"] == "You are Lead." + NOTES_GUIDE


def test_a_workflow_never_started_is_started_by_the_first_message(owner, inline):
    workflow, generation, _ = chat_workflow(owner, start=False)
    assert generation == 0
    _, run = send(workflow, "hi")
    workflow.refresh_from_db()
    assert workflow.live_generation == 1 and run.generation == 1 and run.state == "finished"


def test_the_same_client_message_id_returns_the_first_message_and_run_and_starts_nothing(owner, inline):
    workflow, _, _ = chat_workflow(owner)
    first, run, created = chat_message_send(workflow=workflow, text="once", client_message_id="c-1")
    again, run_again, created_again = chat_message_send(workflow=workflow, text="once", client_message_id="c-1")
    assert created and not created_again
    assert (again.pk, run_again.pk) == (first.pk, run.pk)
    assert ChatRun.objects.count() == 1 and Firing.objects.count() == 1
    assert ChatMessage.objects.filter(role="user").count() == 1


def test_a_second_send_during_a_run_is_refused_run_in_progress(owner, broker):
    workflow, _, _ = chat_workflow(owner)
    _, run, _ = chat_message_send(workflow=workflow, text="first")
    with pytest.raises(ServiceError) as excinfo:
        chat_message_send(workflow=workflow, text="second")
    assert refusal(excinfo) == "run_in_progress" and excinfo.value.extra["run_id"] == run.pk
    assert excinfo.value.status == 409


def test_the_partial_unique_index_allows_one_active_run_per_session(owner, broker):
    workflow, _, _ = chat_workflow(owner)
    message, run, _ = chat_message_send(workflow=workflow, text="first")
    with pytest.raises(IntegrityError):
        ChatRun.objects.create(
            session=run.session, user_message=message, generation=1, agent_node_id="x", state="running"
        )


def test_two_sends_at_the_same_moment_make_exactly_one_run(owner, broker):
    """Given two requests queued on the same session lock at once, when the lock opens, exactly one is admitted."""
    from django.db import transaction

    workflow, _, _ = chat_workflow(owner)
    session = ChatSession.objects.create(workflow=workflow)

    def racer(text):
        try:
            chat_message_send(workflow=workflow, text=text)
            return "ok"
        except ServiceError as exc:
            return exc.code

    with transaction.atomic():
        chat_session_for_update(session_id=session.pk)  # both sends will wait here together
        racers = [Competitor(functools.partial(racer, f"message {i}"), name=f"send {i}").start() for i in range(2)]
        for competitor in racers:
            wait_until_waiting_on_a_lock(pid=competitor.pid)
    assert sorted(competitor.result() for competitor in racers) == ["ok", "run_in_progress"]
    assert ChatRun.objects.count() == 1 and ChatMessage.objects.count() == 1


@pytest.mark.parametrize("text", ["", "   ", "x" * 20_001])
def test_an_empty_or_too_long_message_is_an_invalid_request(owner, inline, text):
    workflow, _, _ = chat_workflow(owner)
    with pytest.raises(ServiceError) as excinfo:
        chat_message_send(workflow=workflow, text=text)
    assert refusal(excinfo) == "invalid_request"


# --- stop -----------------------------------------------------------------------------------------------------


def test_stopping_a_pending_run_stops_it_at_once(owner, broker, settings):
    workflow, _, _ = chat_workflow(owner)
    _, run, _ = chat_message_send(workflow=workflow, text="never mind")
    stopped = chat_run_stop(workflow=workflow, run_id=run.pk)
    assert stopped.state == "stopped" and stopped.reply_message.status == "stopped"
    assert Firing.objects.get(pk=run.firing_id).state == "stopped"
    # The lane is free again.
    settings.AGENT_EXECUTION_MODE = "inline"
    _, second = send(workflow, "next")
    assert second.state == "finished"


def test_stop_of_an_unknown_or_foreign_run_is_not_found(owner, other_owner, inline):
    workflow, _, _ = chat_workflow(owner)
    _, run = send(workflow, "hi")
    theirs, _, _ = chat_workflow(other_owner)
    with pytest.raises(ServiceError) as excinfo:
        chat_run_stop(workflow=theirs, run_id=run.pk)
    assert refusal(excinfo) == "not_found"


# --- edit, try again, switch --------------------------------------------------------------------------------


def two_turns(owner):
    workflow, generation, ids = chat_workflow(owner)
    first, _ = send(workflow, "one")
    second, run = send(workflow, "two")
    return workflow, generation, ids["lead"], first, second, run


def test_edit_rewinds_the_agent_to_before_the_edited_message_and_switch_restores_the_old_branch(owner, inline):
    workflow, generation, agent, _, second, _ = two_turns(owner)
    before = stored(workflow, generation, agent)
    assert texts(before)[1:] == ["one", "I see 0 earlier messages. You said: one", "two",
                                 "I see 2 earlier messages. You said: two"]  # fmt: skip
    edited, run = chat_message_edit(workflow=workflow, message_id=second.pk, text="TWO", expected_revision=None)
    run.refresh_from_db()
    assert run.kind == "edit" and run.state == "finished"
    after = stored(workflow, generation, agent)
    # The abandoned turn is forgotten: the agent sees only the first turn before the edited message.
    assert texts(after)[1:] == ["one", "I see 0 earlier messages. You said: one", "TWO",
                                "I see 2 earlier messages. You said: TWO"]  # fmt: skip
    thread = chat_thread(workflow=workflow)
    assert thread["messages"][2]["siblings"] == {"index": 2, "count": 2, "previous_id": second.pk, "next_id": None}
    assert ChatBranchSnapshot.objects.filter(agent_node_id=agent).count() == 1

    chat_message_switch(workflow=workflow, message_id=second.pk, expected_revision=revision(workflow))
    restored = stored(workflow, generation, agent)
    assert texts(restored) == texts(before)
    assert [m["text"] for m in chat_thread(workflow=workflow)["messages"]][2] == "two"
    # And forward again.
    chat_message_switch(workflow=workflow, message_id=edited.pk)
    assert texts(stored(workflow, generation, agent)) == texts(after)


def test_try_again_answers_beside_the_latest_answer_and_forgets_the_old_one(owner, inline):
    workflow, generation, agent, _, _, run = two_turns(owner)
    old_answer = run.reply_message
    again = chat_message_regenerate(workflow=workflow, message_id=old_answer.pk)
    again.refresh_from_db()
    assert again.kind == "regenerate" and again.state == "finished"
    assert again.reply_message.parent_id == old_answer.parent_id and again.reply_message.kind == "retry"
    # The stored conversation holds the new answer only (one answer to "two").
    assert texts(stored(workflow, generation, agent)).count("two") == 1
    thread = chat_thread(workflow=workflow)
    assert thread["messages"][-1]["siblings"]["count"] == 2
    chat_message_switch(workflow=workflow, message_id=old_answer.pk)
    assert chat_thread(workflow=workflow)["messages"][-1]["id"] == old_answer.pk


def test_send_edit_and_try_again_start_their_answer_alike_and_only_the_moves_announce_a_new_shape(
    owner, inline, capture_events
):
    # One way to start an answer (chat_answer_start): the owner's message is the shown leaf when the run starts,
    # the run's parent is the run that answered the message above, and a branch move announces `chat.updated`.
    workflow, _, _, _, _, second_run = two_turns(owner)
    starts = []
    for move in ("send", "edit", "regenerate"):
        capture_events.clear()
        before = revision(workflow)
        if move == "send":
            three, run, _ = chat_message_send(workflow=workflow, text="three")
        elif move == "edit":
            _, run = chat_message_edit(workflow=workflow, message_id=three.pk, text="THREE")
        else:
            latest = ChatSession.objects.get(workflow=workflow).active_leaf_id
            run = chat_message_regenerate(workflow=workflow, message_id=latest)
        run.refresh_from_db()
        started = capture_events.events("run.started")
        assert started == [
            {
                "type": "run.started",
                "workflow_id": workflow.pk,
                "kind": run.kind,
                "state": "pending",
                "user_message_id": run.user_message_id,
            }
        ]
        updated = capture_events.events("chat.updated")
        # The move's own bump, before the answer's end bumps again.
        expected = (
            [] if move == "send" else [chat_updated_event(workflow_id=workflow.pk, revision=before + 1, reason=move)]
        )
        assert updated == expected
        starts.append((run.kind, run.user_message.kind, run.user_message.parent_id, run.parent_run_id))
    second_answer = second_run.reply_message_id
    assert starts == [
        ("message", "message", second_answer, second_run.pk),
        ("edit", "edit", second_answer, second_run.pk),
        ("regenerate", "edit", second_answer, second_run.pk),
    ]
    assert ChatMessage.objects.get(pk=run.user_message_id).meta == {"edit_of": three.pk}


def test_try_again_is_only_for_the_latest_answer_and_edit_only_for_the_owners_messages(owner, inline):
    workflow, _, _, first, _, run = two_turns(owner)
    first_answer = ChatMessage.objects.get(parent=first)
    with pytest.raises(ServiceError) as excinfo:
        chat_message_regenerate(workflow=workflow, message_id=first_answer.pk)
    assert refusal(excinfo) == "not_editable"
    with pytest.raises(ServiceError) as excinfo:
        chat_message_edit(workflow=workflow, message_id=run.reply_message_id, text="x")
    assert refusal(excinfo) == "not_editable"


def test_a_move_from_a_stale_revision_is_refused_revision_conflict(owner, inline):
    workflow, _, _, _, second, _ = two_turns(owner)
    stale = revision(workflow) - 1
    with pytest.raises(ServiceError) as excinfo:
        chat_message_edit(workflow=workflow, message_id=second.pk, text="x", expected_revision=stale)
    assert refusal(excinfo) == "revision_conflict" and excinfo.value.extra["revision"] == revision(workflow)


def test_a_move_during_a_run_is_refused_run_in_progress(owner, monkeypatch, settings, inline):
    workflow, _, _, _, second, _ = two_turns(owner)
    hold_broker(monkeypatch, settings)
    chat_message_send(workflow=workflow, text="three")
    with pytest.raises(ServiceError) as excinfo:
        chat_message_edit(workflow=workflow, message_id=second.pk, text="x")
    assert refusal(excinfo) == "run_in_progress"


def test_cannot_rewind_after_the_conversation_was_compacted(owner, inline):
    workflow, generation, agent, _, second, _ = two_turns(owner)
    key = conversation_key(workflow.pk, generation, agent)
    current = stored(workflow, generation, agent)
    summary = {"role": "user", "blocks": [{"type": "text", "text": "## Compacted conversation summary\nearlier"}],
               "meta": {"compaction_summary": True}}  # fmt: skip
    with lock_conversations([key]):
        replace_conversation_locked(key, [current[0], summary, *current[-2:]], reason="compaction")
    with pytest.raises(ServiceError) as excinfo:
        chat_message_edit(workflow=workflow, message_id=second.pk, text="x")
    assert refusal(excinfo) == "cannot_rewind"
    # Nothing moved: the thread and the conversation are as they were.
    assert len(stored(workflow, generation, agent)) == 4
    assert ChatMessage.objects.filter(kind="edit").count() == 0


def test_rewinding_to_empty_always_works_even_after_a_clear(owner, inline):
    from conversations.store import clear_conversation

    workflow, generation, agent, first, _, _ = two_turns(owner)
    clear_conversation(workflow, generation=generation)
    _, run = chat_message_edit(workflow=workflow, message_id=first.pk, text="again from the top")
    run.refresh_from_db()
    assert run.state == "finished"
    assert texts(stored(workflow, generation, agent))[1:] == [
        "again from the top",
        "I see 0 earlier messages. You said: again from the top",
    ]


def test_a_snapshot_over_the_byte_limit_leaves_the_old_branch_unavailable(owner, inline, settings):
    workflow, generation, agent, _, second, _ = two_turns(owner)
    settings.CHAT_MAX_SNAPSHOT_BYTES = 1024
    chat_message_edit(workflow=workflow, message_id=second.pk, text="TWO " + "x" * 2000)
    with pytest.raises(ServiceError) as excinfo:
        chat_message_switch(workflow=workflow, message_id=second.pk)
    assert refusal(excinfo) == "branch_unavailable"


def test_snapshots_past_the_count_limit_are_dropped_oldest_first(owner, inline, settings):
    settings.CHAT_MAX_SNAPSHOTS_PER_SESSION = 1
    workflow, generation, agent, _, second, run = two_turns(owner)
    chat_message_edit(workflow=workflow, message_id=second.pk, text="v2")  # keeps the "two" branch
    latest = ChatSession.objects.get(workflow=workflow).active_leaf
    chat_message_regenerate(workflow=workflow, message_id=latest.pk)  # keeps the "v2" answer; drops "two"'s
    assert ChatBranchSnapshot.objects.count() == 1
    with pytest.raises(ServiceError) as excinfo:
        chat_message_switch(workflow=workflow, message_id=second.pk)
    assert refusal(excinfo) == "branch_unavailable"


def test_a_message_of_an_older_generation_cannot_be_edited(owner, inline):
    from workflows.services import workflow_save, workflow_start

    workflow, _, _, first, _, _ = two_turns(owner)
    workflow.refresh_from_db()
    workflow_save(workflow=workflow, graph=workflow.graph, revision=workflow.revision, name="renamed")
    workflow.refresh_from_db()
    generation, created = workflow_start(workflow=workflow)
    assert created and generation.number == 2
    with pytest.raises(ServiceError) as excinfo:
        chat_message_edit(workflow=workflow, message_id=first.pk, text="x")
    assert refusal(excinfo) == "older_generation"


def test_ids_of_another_session_are_not_found(owner, other_owner, inline):
    workflow, _, _, first, _, _ = two_turns(owner)
    theirs, _, _ = chat_workflow(other_owner)
    for call in (
        lambda: chat_message_edit(workflow=theirs, message_id=first.pk, text="x"),
        lambda: chat_message_switch(workflow=theirs, message_id=first.pk),
        lambda: chat_feedback_set(workflow=theirs, message_id=first.pk, rating="good"),
    ):
        with pytest.raises(ServiceError) as excinfo:
            call()
        assert refusal(excinfo) == "not_found"


# --- notes ----------------------------------------------------------------------------------------------------


def test_a_newer_note_replaces_an_untold_one_with_the_same_key(owner, inline):
    workflow, _, _, _, _, run = two_turns(owner)
    chat_feedback_set(workflow=workflow, message_id=run.reply_message_id, rating="bad")
    chat_feedback_set(workflow=workflow, message_id=run.reply_message_id, rating="good")
    (note,) = ChatNote.objects.all()
    assert note.key == f"feedback:{run.reply_message_id}" and '"rating": "good"' in note.text


def test_a_note_reaches_the_next_message_and_is_told_only_after_it_answered(owner, inline):
    workflow, generation, agent, _, _, run = two_turns(owner)
    chat_feedback_set(workflow=workflow, message_id=run.reply_message_id, rating="bad")
    _, third = send(workflow, "three")
    note = ChatNote.objects.get()
    assert note.told_at is not None and note.claimed_by_id == third.pk
    firing = Firing.objects.get(pk=third.firing_id)
    user_text = firing_messages(firing)[-2]["blocks"][0]["text"]
    assert user_text.startswith('[feedback]{"answer": "I see 2 earlier messages. You said: two", "rating": "bad"}')
    assert user_text.endswith("three")
    # Never in the stored system prompt.
    system = stored(workflow, generation, agent)[0]["blocks"][0]["text"]
    assert system == "You are Lead." + NOTES_GUIDE and "You said: two" not in system
    # Told once: the next message carries no note.
    _, fourth = send(workflow, "four")
    assert firing_messages(Firing.objects.get(pk=fourth.firing_id))[-2]["blocks"][0]["text"] == "four"


def test_a_note_is_offered_again_after_a_failed_run(owner, inline, monkeypatch, settings):
    from django.db import transaction

    from agents.services.firings import firing_end
    from agents.services.prepare import prepare_payload

    workflow, _, _, _, _, run = two_turns(owner)
    chat_feedback_set(workflow=workflow, message_id=run.reply_message_id, rating="bad")
    hold_broker(monkeypatch, settings)
    _, failed, _ = chat_message_send(workflow=workflow, text="three")
    # The answering agent is prepared (the note is claimed), then the runtime's watchdog fails the lost firing.
    prepare_payload(str(failed.firing_id))
    claimed_prompt = firing_messages(Firing.objects.get(pk=failed.firing_id))[-1]["blocks"][0]["text"]
    assert claimed_prompt.startswith("[feedback]")
    assert ChatNote.objects.get().claimed_by_id == failed.pk
    with transaction.atomic():
        firing = Firing.objects.select_for_update().get(pk=failed.firing_id)
        firing_end(firing, state=Firing.State.FAILED, error_code="interrupted", error_message="worker lost")
    failed.refresh_from_db()
    assert failed.state == "error" and failed.error_code == "interrupted"
    assert failed.reply_message.status == "error"
    note = ChatNote.objects.get()
    assert note.told_at is None and note.claimed_by_id is None
    # Offered again: the next message carries it.
    settings.AGENT_EXECUTION_MODE = "inline"
    _, fourth = send(workflow, "four")
    assert firing_messages(Firing.objects.get(pk=fourth.firing_id))[-2]["blocks"][0]["text"].startswith("[feedback]")
    assert ChatNote.objects.get().told_at is not None


def test_a_memory_edit_in_the_panel_leaves_a_note_without_content(owner, inline):
    from memory.access import access_memory_namespace
    from memory.services import memory_item_remember

    workflow, _, ids = chat_workflow(owner, memory=True)
    send(workflow, "hi")
    _, namespace = access_memory_namespace(user=owner, workflow_id=workflow.pk, node_id=ids["mem"])
    result = memory_item_remember(namespace=namespace, actor="owner", content="secret plans", announce_to_chat=True)
    note = ChatNote.objects.get()
    assert note.key == f"memory:{result['item']['id']}" and "secret plans" not in note.text
    assert note.text.startswith("[memory]{")


# --- clear and reset ------------------------------------------------------------------------------------------


def test_clear_chat_removes_the_thread_and_the_agents_forget(owner, inline):
    workflow, generation, agent, _, second, run = two_turns(owner)
    chat_feedback_set(workflow=workflow, message_id=run.reply_message_id, rating="good")
    chat_message_edit(workflow=workflow, message_id=second.pk, text="v2")
    counts = chat_clear(workflow=workflow)
    assert counts["messages"] >= 5 and counts["conversations"] == 1
    assert not ChatMessage.objects.exists() and not ChatRun.objects.exists()
    assert not ChatBranchSnapshot.objects.exists() and not ChatNote.objects.exists()
    assert stored(workflow, generation, agent) == []
    _, run = send(workflow, "fresh")
    assert run.reply_message.text == "I see 0 earlier messages. You said: fresh"


def test_clear_chat_reads_the_live_generation_from_the_row_not_from_a_stale_workflow(owner, inline):
    from workflows.models import Workflow

    workflow, _, ids = chat_workflow(owner, start=False)
    stale = Workflow.objects.get(pk=workflow.pk)  # read before the first message starts the workflow
    _, run = send(workflow, "hello")
    assert stale.live_generation == 0 and run.generation == 1
    counts = chat_clear(workflow=stale)
    assert counts["conversations"] == 1 and stored(workflow, run.generation, ids["lead"]) == []


def test_workflow_reset_ends_live_runs_with_code_reset_and_clears_the_thread(owner, broker):
    from workflows.services import workflow_reset

    workflow, _, _ = chat_workflow(owner)
    _, run, _ = chat_message_send(workflow=workflow, text="hello")
    outcome = workflow_reset(workflow=workflow)
    assert outcome.report["listeners"]["chat"]["runs_ended"] == 1
    assert not ChatRun.objects.exists() and not ChatMessage.objects.exists()
    assert Firing.objects.get(pk=run.firing_id).state == "stopped"


def test_tool_steps_are_recorded_under_the_answer_with_arguments_and_a_short_result(owner, inline):
    workflow, _, _ = chat_workflow(owner, memory=True)
    _, run = send(workflow, "remember: the launch is on Friday")
    (step,) = run.steps.all()
    assert (step.name, step.state, step.is_error) == ("memory", "finished", False)
    answer = chat_thread(workflow=workflow)["messages"][-1]
    (shown,) = answer["run"]["steps"]
    assert shown["name"] == "memory" and shown["state"] == "finished" and shown["is_error"] is False
    assert shown["arguments"] == {"operation": "remember", "content": "the launch is on Friday"}
    item_id = json.loads(shown["result"])["item"]["id"]
    assert shown["summary"] == f"Memory #{item_id}, version 1: the launch is on Friday"
    assert answer["run"]["duration_ms"] is not None
    # The answer after the tool call is a sentence, not the tool's JSON.
    assert answer["text"] == f"Done. Saved to memory as #{item_id} (version 1): the launch is on Friday."
    assert "{" not in answer["text"] and "{" not in answer["html"]


def test_a_teammates_cursor_is_recorded_and_rewound_too(owner, inline):
    workflow, generation, ids = chat_workflow(owner, teammate=True)
    send(workflow, "hello")
    second, run = send(workflow, "ask Helper: say hi")
    assert set(run.context_cursors) == {ids["lead"], ids["helper"]}
    assert len(stored(workflow, generation, ids["helper"])) == 3
    chat_message_edit(workflow=workflow, message_id=second.pk, text="no delegation this time")
    # The teammate first worked in the abandoned run: it forgets that work (back to empty).
    assert stored(workflow, generation, ids["helper"]) == []
    chat_message_switch(workflow=workflow, message_id=second.pk)
    assert len(stored(workflow, generation, ids["helper"])) == 3


def test_a_workflow_without_an_answering_agent_or_stopped_is_refused_in_plain_words(owner, inline):
    from workflows.services import workflow_create, workflow_start, workflow_stop

    lonely = workflow_create(owner=owner, name="no trigger", graph={"nodes": [], "edges": []}).workflow
    # Start refuses it with the chat's own sentence; the chat (which starts a never-started workflow) too.
    with pytest.raises(ServiceError) as started:
        workflow_start(workflow=lonely)
    with pytest.raises(ServiceError) as excinfo:
        chat_message_send(workflow=lonely, text="hello?")
    assert refusal(excinfo) == "no_answering_agent" and "chat trigger" in excinfo.value.message
    assert (started.value.code, started.value.message) == ("no_answering_agent", excinfo.value.message)
    workflow, _, _ = chat_workflow(owner)
    workflow_stop(workflow=workflow)
    with pytest.raises(ServiceError) as excinfo:
        chat_message_send(workflow=workflow, text="hello?")
    assert refusal(excinfo) == "workflow_stopped"
    assert not ChatMessage.objects.exists()


def test_a_conversation_repaired_on_load_can_still_be_rewound(owner, inline):
    """Given a stored turn whose tool call was left open (a crash), the next run's cursor is of the stored rows, so
    editing that run's message rewinds cleanly."""
    workflow, generation, agent, _, _, _ = two_turns(owner)
    key = conversation_key(workflow.pk, generation, agent)
    current = stored(workflow, generation, agent)
    open_call = {
        "role": "assistant",
        "blocks": [{"type": "tool_call", "id": "c1", "name": "memory", "arguments_raw": "{}", "arguments": {}}],
    }
    with lock_conversations([key]):
        replace_conversation_locked(key, [*current, open_call], reason="crash")
    third, run = send(workflow, "three")
    assert run.state == "finished"
    assert run.context_cursors[agent]["length"] == len(current) + 1
    chat_message_edit(workflow=workflow, message_id=third.pk, text="THREE")
    assert texts(stored(workflow, generation, agent))[-2] == "THREE"


def test_every_save_in_the_chat_services_names_its_fields():
    # A save without update_fields writes every column back, over whatever another transaction changed meanwhile.
    import ast
    from pathlib import Path

    import chat.services

    unnamed = []
    for path in sorted(Path(chat.services.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "save":
                if not any(keyword.arg == "update_fields" for keyword in node.keywords):
                    unnamed.append(f"{path.name}:{node.lineno}")
    assert unnamed == []
