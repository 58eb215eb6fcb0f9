"""The store's contracts (docs/architecture.md#conversation-store): load/save/clear/list, ts stamping, prefix-only
writes, load failures (docs/invariants.md#save-failures), only save and the locked replace rewrite
(docs/invariants.md#only-two-writers), listeners after commit."""

import copy
import json
import logging
import pickle

import pytest
from django.db import connection, transaction

from conversations.models import AgentConversation, ConversationMessage
from conversations.store import (
    ConversationConflict,
    ConversationInvalid,
    ConversationLoadFailed,
    ConversationTooLarge,
    clear_conversation,
    conversation_cursor,
    conversation_key,
    forget_process_copies,
    list_conversations,
    load_conversation,
    load_conversation_snapshot,
    lock_conversations,
    register_conversation_listener,
    replace_conversation_locked,
    save_conversation,
    save_conversation_safely,
    seed_request,
    starts_with,
    stored_cursor,
    stored_starts_with,
    unregister_conversation_listener,
)
from providers.wire import validate_messages
from tests.conversations.factories import assistant, result, system, turn, user

pytestmark = pytest.mark.django_db


def _without_ts(messages):
    return [{k: v for k, v in m.items() if k != "ts"} for m in messages]


def _row_ids(key):
    return list(
        ConversationMessage.objects.filter(
            conversation__workflow_id=key.workflow_id, conversation__agent_node_id=key.agent_node_id
        )
        .order_by("position")
        .values_list("id", flat=True)
    )


def test_load_of_a_missing_row_is_empty_and_writes_nothing(key):
    assert load_conversation(key) == []
    assert not AgentConversation.objects.exists()


def test_save_then_load_round_trips_the_exact_list_with_ts_stamped(key):
    messages = [system(), *turn(1)]
    result = save_conversation(key, messages)
    assert result.changed and result.message_count == 5 and result.written == 5
    loaded = load_conversation(key)
    assert _without_ts(loaded) == messages
    assert all(isinstance(m["ts"], str) and m["ts"] for m in loaded)
    validate_messages(loaded)


def test_save_does_not_modify_the_callers_dicts(key):
    # Invariant 1: what the firing sends is the caller's list; the store must not add ts to it behind its back.
    messages = [system(), *turn(1)]
    before = copy.deepcopy(messages)
    save_conversation(key, messages)
    assert messages == before


def test_an_appended_turn_writes_only_the_new_rows_and_keeps_prefix_ts(key):
    first = [system(), *turn(1)]
    save_conversation(key, first)
    loaded = load_conversation(key)
    ids_before, ts_before = _row_ids(key), [m["ts"] for m in loaded]

    result = save_conversation(key, [*loaded, *turn(2)])

    assert (result.kept, result.written, result.removed) == (5, 4, 0)
    assert _row_ids(key)[:5] == ids_before  # the prefix rows were not rewritten
    again = load_conversation(key)
    assert [m["ts"] for m in again[:5]] == ts_before
    assert _without_ts(again) == [*first, *turn(2)]


def test_a_prefix_without_ts_from_the_caller_is_still_the_same_prefix(key):
    # The runtime re-seeds: a fresh system dict (no ts) plus stored messages. Only ts differs: nothing rewritten.
    save_conversation(key, [system(), *turn(1)])
    result = save_conversation(key, [system(), *turn(1), *turn(2)])
    assert result.kept == 5 and result.written == 4


def test_saving_the_same_list_again_changes_nothing(key):
    save_conversation(key, [system(), *turn(1)])
    loaded = load_conversation(key)
    version = AgentConversation.objects.get().version
    result = save_conversation(key, loaded)
    assert not result.changed
    assert AgentConversation.objects.get().version == version


@pytest.mark.parametrize("cold", [False, True])
def test_a_changed_middle_message_rewrites_from_there(key, cold):
    save_conversation(key, [system(), *turn(1), *turn(2)])
    loaded = load_conversation(key)
    if cold:
        forget_process_copies()  # another process wrote last: the stored hashes decide
    changed = [*loaded[:4], {**loaded[4], "blocks": [{"type": "text", "text": "edited"}]}, *loaded[5:6]]
    result = save_conversation(key, changed)
    assert (result.kept, result.written, result.removed) == (4, 2, 5)
    assert _without_ts(load_conversation(key)) == _without_ts(changed)
    assert AgentConversation.objects.get().size_bytes == sum(
        ConversationMessage.objects.values_list("size_bytes", flat=True)
    )


def test_loaded_messages_are_read_only_and_a_rebuilt_message_is_still_detected(key):
    # A load hands out the store's own copy, so it must not be changeable in place: every container refuses.
    save_conversation(key, [system(), *turn(1)])
    loaded = load_conversation(key)
    block = loaded[1]["blocks"][0]
    for change in (
        lambda: block.__setitem__("text", "changed in place"),
        lambda: block.update(text="x"),
        lambda: block.pop("text"),
        lambda: loaded[1]["blocks"].append({"type": "text", "text": "x"}),
        lambda: loaded[1]["blocks"].__setitem__(0, {"type": "text", "text": "x"}),
        lambda: loaded[1].setdefault("meta", {}),
    ):
        with pytest.raises(TypeError, match="read-only"):
            change()
    loaded.append(turn(2)[0])  # the list around the messages is the caller's own
    assert len(load_conversation(key)) == 5

    # Copies are ordinary, changeable dicts and lists; a rebuilt message is compared by content.
    edited = copy.deepcopy(loaded[1])
    edited["blocks"][0]["text"] = "changed"
    assert type(edited) is dict and type(edited["blocks"]) is list
    assert type(pickle.loads(pickle.dumps(loaded[1]))) is dict
    result = save_conversation(key, [loaded[0], edited, *loaded[2:5]])
    assert result.kept == 1 and result.written == 4
    assert load_conversation(key)[1]["blocks"][0]["text"] == "changed"


def test_an_unchanged_loaded_prefix_is_found_by_identity(key):
    from conversations.store import copies

    save_conversation(key, [system(), *turn(1)])
    loaded = load_conversation(key)
    copy_held = copies.process_copies.get(key).messages
    # The same objects, so the list comparison of the prefix stops at each pointer and never walks a message.
    assert copy_held is not loaded and all(a is b for a, b in zip(loaded, copy_held, strict=True))
    result = save_conversation(key, [*loaded, *turn(2)])
    assert (result.kept, result.written) == (5, 4)


def test_the_cold_path_and_the_warm_path_store_the_same(key, workflow):
    other = conversation_key(workflow.pk, 1, "other")
    for k in (key, other):
        save_conversation(k, [system(), *turn(1)])
    load_conversation(key)
    forget_process_copies()
    save_conversation(key, [*load_conversation(key), *turn(2)])
    forget_process_copies()
    save_conversation(other, [system(), *turn(1), *turn(2)])
    assert _without_ts(load_conversation(key)) == _without_ts(load_conversation(other))
    assert stored_cursor(key)["digest"] == stored_cursor(other)["digest"]


def test_truncating_and_emptying(key):
    save_conversation(key, [system(), *turn(1)])
    assert save_conversation(key, [system()]).removed == 4
    assert len(load_conversation(key)) == 1
    save_conversation(key, [])
    assert load_conversation(key) == []
    assert AgentConversation.objects.get().size_bytes == 0


def test_generation_zero_stores_nothing(workflow):
    test_run = conversation_key(workflow.pk, 0, "a")
    result = save_conversation(test_run, [user("hi")])
    assert not result.stored and not AgentConversation.objects.exists()
    assert load_conversation(test_run) == []


def test_invalid_messages_are_refused_by_save_and_swallowed_by_the_safe_save(key, caplog):
    orphan_result = {"role": "tool", "blocks": [{"type": "tool_result", "tool_call_id": "x", "name": "m",
                                                 "content": "c", "is_error": False}]}  # fmt: skip
    with pytest.raises(ConversationInvalid):
        save_conversation(key, [user("hi"), orphan_result])
    with caplog.at_level(logging.ERROR, logger="conversations.store"):
        assert save_conversation_safely(key, [user("hi"), orphan_result]) is None
    record = next(r for r in caplog.records if "save failed" in r.getMessage())
    assert (record.workflow_id, record.generation, record.agent_node_id) == (
        key.workflow_id,
        key.generation,
        key.agent_node_id,
    )
    assert load_conversation(key) == []


@pytest.mark.django_db(transaction=True)
def test_a_save_that_fails_in_the_database_does_not_raise(key, caplog):
    # Given a save PostgreSQL refuses at commit (its workflow was deleted meanwhile: a foreign key violation)
    gone = conversation_key(key.workflow_id + 10_000, 1, "agent")
    with caplog.at_level(logging.ERROR, logger="conversations.store"):
        result = save_conversation_safely(gone, [system(), user("after a billed call")])
    # Then the turn goes on: no exception, None, and a log line naming the key
    assert result is None
    record = next(r for r in caplog.records if "save failed" in r.getMessage())
    assert (record.workflow_id, record.agent_node_id) == (gone.workflow_id, "agent")
    assert record.error_type == "IntegrityError"
    assert not AgentConversation.objects.exists()
    # and the connection is still usable for the rest of the turn
    save_conversation(key, [user("next")])


def test_messages_round_trip_byte_identical(key):
    # key order, number spelling and a NUL character survive (a `json` column keeps the text as written)
    odd = {"role": "assistant", "blocks": [{"type": "text", "text": "nul \u0000 and \u00e9", "z": 1, "a": 1.50}],
           "provider_state": {"openai": {"encrypted_content": "gAAAA==", "b": [3, 2, 1], "a": None}}}  # fmt: skip
    save_conversation(key, [user("q"), odd])
    stored = load_conversation(key)[1]
    assert json.dumps({k: v for k, v in stored.items() if k != "ts"}) == json.dumps(odd)


def test_a_row_over_the_seed_cap_raises_too_large_naming_the_context(key, settings):
    save_conversation(key, [system(), user("x" * 3000)])
    settings.CONVERSATION_SEED_MAX_BYTES = 2048
    with pytest.raises(ConversationTooLarge) as raised:
        load_conversation(key)
    assert "Context" in raised.value.message and "Clear" in raised.value.message
    assert raised.value.code == "conversation_too_large"


def test_a_one_megabyte_row_is_too_large_with_the_default_cap(key):
    save_conversation(key, [system(), user("y" * 1_000_001)])
    with pytest.raises(ConversationTooLarge):
        load_conversation(key)


def test_an_unreadable_row_fails_the_load_loudly(key):
    save_conversation(key, [system(), user("hi")])
    ConversationMessage.objects.filter(position=1).update(data="not a message")
    with pytest.raises(ConversationLoadFailed) as raised:
        load_conversation(key)
    assert raised.value.retryable


def test_a_missing_row_position_fails_the_load(key):
    save_conversation(key, [system(), user("hi"), assistant("a")])
    ConversationMessage.objects.filter(position=1).delete()
    with pytest.raises(ConversationLoadFailed):
        load_conversation(key)


def test_clear_and_list(workflow):
    keys = [conversation_key(workflow.pk, g, a) for g in (1, 2) for a in ("a", "b")]
    for k in keys:
        save_conversation(k, [user(f"{k.generation}{k.agent_node_id}")])
    listed = list_conversations(workflow)
    assert [(r["generation"], r["agent_node_id"], r["message_count"]) for r in listed] == [
        (2, "a", 1),
        (2, "b", 1),
        (1, "a", 1),
        (1, "b", 1),
    ]
    assert clear_conversation(workflow, generation=2, agent_node_id="a") == 1
    assert clear_conversation(workflow, generation=1) == 2
    assert clear_conversation(workflow) == 1
    assert clear_conversation(workflow) == 0
    assert not ConversationMessage.objects.exists()


def test_cursor_helpers(key):
    messages = [system(), *turn(1)]
    cursor = conversation_cursor(messages)
    assert cursor["length"] == 5
    assert starts_with([*messages, *turn(2)], cursor)
    assert not starts_with([system("other"), *turn(1)], cursor)
    assert not starts_with(messages[:3], cursor)
    save_conversation(key, messages)
    stored = load_conversation(key)
    # ts is not part of the digest: the stored (stamped) list has the same cursor
    assert conversation_cursor(stored) == cursor == stored_cursor(key)
    assert stored_starts_with(key, cursor)
    assert stored_starts_with(key, conversation_cursor(messages[:2]))
    assert stored_starts_with(key, {"length": 0, "digest": conversation_cursor([])["digest"]})
    save_conversation(key, [system("changed"), *turn(1)])
    assert not stored_starts_with(key, cursor)


@pytest.mark.django_db(transaction=True)
def test_listeners_see_committed_saves_and_not_rolled_back_ones(key):
    seen = []
    listener = register_conversation_listener(seen.append)

    def broken(change):
        raise RuntimeError("a broken listener never fails the save")

    register_conversation_listener(broken)
    try:
        save_conversation(key, [user("kept")])
        with pytest.raises(RuntimeError), transaction.atomic():
            save_conversation(key, [user("kept"), assistant("rolled back")])
            raise RuntimeError("boom")
        assert [(c.message_count, c.reason) for c in seen] == [(1, "save")]
        assert json.dumps(vars(seen[0]))  # metadata only: plain values
        assert "kept" not in json.dumps(vars(seen[0]))
        assert _without_ts(load_conversation(key)) == [user("kept")]
    finally:
        unregister_conversation_listener(listener)
        unregister_conversation_listener(broken)


def test_lock_conversations_creates_missing_headers_and_replace_rewrites(workflow):
    a, b = conversation_key(workflow.pk, 1, "b-agent"), conversation_key(workflow.pk, 1, "a-agent")
    save_conversation(a, [user("one"), assistant("two"), user("three"), assistant("four")])
    with lock_conversations([a, b]) as locked:
        assert list(locked) == sorted([a, b])  # the fixed order
        assert locked[a].cursor["length"] == 4 and locked[b].cursor["length"] == 0
        replace_conversation_locked(a, load_conversation(a)[:2])
        replace_conversation_locked(b, [user("restored")])
    assert len(load_conversation(a)) == 2
    assert _without_ts(load_conversation(b)) == [user("restored")]


@pytest.mark.django_db(transaction=True)
def test_replace_outside_the_lock_is_refused(key):
    with pytest.raises(RuntimeError):
        replace_conversation_locked(key, [user("x")])


def test_snapshot_is_unrepaired_and_load_is_repaired(key):
    open_call = assistant(calls=[("c1", "memory", {"operation": "list"})])
    save_conversation(key, [user("hi"), open_call])
    assert len(load_conversation_snapshot(key).messages) == 2
    assert len(load_conversation(key)) == 3


def test_the_exact_sent_list_is_saved_after_the_call_then_its_tool_results(key):
    # Invariant 3: [...sent, assistant] after the provider call, then the tool results; the store keeps exactly it.
    sent = seed_request("You are the agent.", load_conversation(key), "look it up")
    assert not AgentConversation.objects.exists()  # nothing is written before a request exists
    answer = assistant(calls=[("k1", "memory", {"operation": "recall", "query": "x"})])
    save_conversation(key, [*sent, answer])
    save_conversation(key, [*sent, answer, result("k1", "found")])
    assert _without_ts(load_conversation(key)) == [*sent, answer, result("k1", "found")]


def test_loading_and_repairing_never_rewrite_the_row(key):
    # Invariant 9: only save (and the locked replace) rewrite; a load, even a repaired one, writes nothing.
    save_conversation(key, [user("q"), assistant(calls=[("k1", "memory", {})])])
    before = AgentConversation.objects.values("version", "message_count", "updated_at").get()
    assert len(load_conversation(key)) == 3
    assert AgentConversation.objects.values("version", "message_count", "updated_at").get() == before


def test_a_long_rewrite_is_inserted_in_chunks(key):
    messages = [user(f"m{n}") if n % 2 == 0 else assistant(f"a{n}") for n in range(2500)]
    assert save_conversation(key, messages).written == 2500
    assert _without_ts(load_conversation(key)) == messages
    assert stored_cursor(key) == conversation_cursor(messages)


def test_a_stale_writer_with_expected_version_is_refused_not_applied(key):
    save_conversation(key, [user("q1"), assistant("a1")])
    snapshot = load_conversation_snapshot(key)
    save_conversation(key, [*snapshot.messages, user("q2"), assistant("a2")])  # another firing's turn
    with pytest.raises(ConversationConflict):
        save_conversation(key, [*snapshot.messages, user("stale")], expected_version=snapshot.version)
    assert len(load_conversation(key)) == 4
    fresh = load_conversation_snapshot(key)
    assert save_conversation(key, [*fresh.messages, user("q3")], expected_version=fresh.version).changed


def test_process_copies_are_bounded_and_the_store_stays_correct_without_them(workflow, settings):
    from conversations.store import copies

    settings.CONVERSATION_CACHE_MAX_BYTES = 3000
    small, large = conversation_key(workflow.pk, 1, "small"), conversation_key(workflow.pk, 1, "large")
    save_conversation(small, [user("s")])
    save_conversation(large, [user("l" * 5000)])
    load_conversation(small)
    load_conversation(large)
    assert copies.process_copies.get(small) is not None
    assert copies.process_copies.get(large) is None  # over the byte bound: never kept
    result = save_conversation(large, [*load_conversation(large), assistant("ok")])
    assert (result.kept, result.written) == (1, 1)
    assert _without_ts(load_conversation(large)) == [user("l" * 5000), assistant("ok")]


def test_an_append_after_another_process_wrote_falls_back_to_the_locked_path(key):
    from conversations.store import copies

    save_conversation(key, [user("q1"), assistant("a1")])
    mine = load_conversation(key)
    stale = copies.process_copies.get(key)  # this process's copy, at the current version
    # another process rewrites the row; this process's copy does not hear of it
    save_conversation(key, [user("q1"), assistant("theirs")])
    copies.process_copies._entries[key] = stale
    result = save_conversation(key, [*mine, user("q2")])
    # the one-statement append did not apply; the locked path compared the stored hashes and rewrote from 1
    assert result.kept == 1 and result.written == 2
    assert _without_ts(load_conversation(key)) == [user("q1"), assistant("a1"), user("q2")]


def test_an_append_inside_the_callers_transaction_commits_with_it(key):
    save_conversation(key, [user("q1"), assistant("a1")])
    loaded = load_conversation(key)
    with transaction.atomic():
        result = save_conversation(key, [*loaded, user("q2")])
        assert result.written == 1
        with connection.cursor() as cursor:  # the caller's transaction is still usable
            cursor.execute("SELECT 1")
    assert len(load_conversation(key)) == 3


def test_a_non_message_anywhere_in_the_list_is_refused(key):
    save_conversation(key, [user("q1"), assistant("a1")])
    loaded = load_conversation(key)
    for broken in (["not a message", *loaded[1:], user("q2")], [*loaded, 42], ("a", "tuple")):
        with pytest.raises(ConversationInvalid):
            save_conversation(key, broken)
    assert _without_ts(load_conversation(key)) == [user("q1"), assistant("a1")]


def test_a_process_holding_a_copy_reads_only_the_rows_past_it(key):
    from conversations.store import copies

    base = [system("s"), *turn(1, tool=False)]
    save_conversation(key, base)
    load_conversation_snapshot(key)
    held = copies.process_copies.get(key)
    grown = save_conversation(key, [*load_conversation_snapshot(key).messages, *turn(2, tool=False)])
    # Another process wrote the new turn: this one still holds the copy of the first messages. Its first message
    # is marked so the test can see whether the load took it from the copy or read it again.
    marked = {**held.messages[0], "meta": {"from": "copy"}}
    copies.process_copies._entries[key] = copies.ProcessCopy(
        held.conversation_id, held.version, [marked, *held.messages[1:]], held.size_bytes, held.digest
    )
    snapshot = load_conversation_snapshot(key)
    assert snapshot.version == grown.version and len(snapshot.messages) == grown.message_count
    assert snapshot.messages[0]["meta"] == {"from": "copy"}  # the prefix was not read again
    assert [m["blocks"] for m in snapshot.messages[len(base) :]] == [m["blocks"] for m in turn(2, tool=False)]


def test_a_copy_whose_prefix_was_rewritten_is_not_reused(key):
    from conversations.store import copies

    save_conversation(key, [system("s"), *turn(1, tool=False)])
    load_conversation_snapshot(key)
    held = copies.process_copies.get(key)
    with lock_conversations([key]):
        replace_conversation_locked(key, [system("s"), user("rewritten"), *turn(2, tool=False)])
    copies.process_copies._entries[key] = held  # stale: same length, other content
    snapshot = load_conversation_snapshot(key)
    assert snapshot.messages[1]["blocks"][0]["text"] == "rewritten"


def test_a_list_rewritten_under_a_lease_is_kept_for_the_holder_until_it_releases(key):
    from conversations.models import RetainedConversation
    from conversations.store import (
        StoredPrefix,
        acquire_firing_lease,
        clear_conversation,
        conversation_prefix_messages,
        release_firing_lease,
    )

    messages = [system("s"), *turn(1, tool=False)]
    prefix = StoredPrefix.of(save_conversation(key, messages))
    clear_conversation(key.workflow_id, generation=key.generation)  # no lease: nothing is kept
    assert not RetainedConversation.objects.exists()

    prefix = StoredPrefix.of(save_conversation(key, messages))
    assert acquire_firing_lease(key, owner_token="firing-1", ttl_seconds=60)
    clear_conversation(key.workflow_id, generation=key.generation)  # the owner clears mid-turn
    kept = conversation_prefix_messages(key, prefix)
    assert [m["blocks"] for m in kept] == [m["blocks"] for m in messages]
    assert load_conversation(key) == []  # the stored conversation itself is cleared
    assert release_firing_lease(key, owner_token="firing-1")
    assert not RetainedConversation.objects.exists()
    with pytest.raises(ConversationConflict):
        conversation_prefix_messages(key, prefix)
