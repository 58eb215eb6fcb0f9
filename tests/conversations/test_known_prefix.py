"""An appended turn from a process that holds no copy: the caller's known prefix replaces reading the list."""

import pytest
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext

from conversations.models import AgentConversation, ConversationMessage
from conversations.store import (
    StoredPrefix,
    append_conversation,
    conversation_key,
    forget_process_copies,
    load_conversation,
    save_conversation,
)
from workflows.models import Workflow

pytestmark = pytest.mark.django_db(transaction=True)


def _msg(role, text):
    return {"role": role, "blocks": [{"type": "text", "text": text}]}


@pytest.fixture
def key(owner):
    workflow = Workflow.objects.create(owner=owner, name="w")
    return conversation_key(workflow.pk, 1, "agent")


def test_an_append_after_a_known_prefix_reads_no_stored_message(key):
    first = [_msg("system", "s"), *[_msg("user" if i % 2 == 0 else "assistant", f"m{i}") for i in range(200)]]
    result = save_conversation(key, first)
    forget_process_copies()  # as in another worker process
    longer = [*first, _msg("user", "next"), _msg("assistant", "answer")]
    with CaptureQueriesContext(connection) as queries:
        appended = save_conversation(key, longer, known_prefix=StoredPrefix.of(result))
    assert appended.kept == len(first) and appended.written == 2 and appended.version == result.version + 1
    assert len(queries.captured_queries) == 1  # one conditional statement, no read of the stored rows
    assert [m["blocks"][0]["text"] for m in load_conversation(key)] == [m["blocks"][0]["text"] for m in longer]
    # The chain it wrote is the one a verified save computes: a full re-save finds nothing to change.
    forget_process_copies()
    again = save_conversation(key, load_conversation(key))
    assert not again.changed


def test_a_stale_known_prefix_falls_back_to_the_verified_save(key):
    base = [_msg("system", "s"), _msg("user", "a"), _msg("assistant", "b")]
    stale = StoredPrefix.of(save_conversation(key, base))
    rewritten = [_msg("system", "s"), _msg("user", "changed"), _msg("assistant", "c")]
    save_conversation(key, rewritten)  # another writer (a chat branch move) changed the list meanwhile
    forget_process_copies()
    mine = [*base, _msg("user", "d"), _msg("assistant", "e")]
    result = save_conversation(key, mine, known_prefix=stale)
    assert [m["blocks"][0]["text"] for m in load_conversation(key)] == ["s", "a", "b", "d", "e"]
    assert result.kept == 1  # the verified path compared and rewrote from the first difference


def test_an_append_that_fails_inside_a_transaction_rolls_back_to_its_savepoint(key):
    """The append inside a caller's transaction (persist) is sent with its SAVEPOINT and RELEASE as one round trip;
    when it fails, the savepoint is rolled back and the caller's transaction goes on (docs/invariants.md#save-failures:
    a failed save never fails the turn)."""
    base = [_msg("system", "s"), _msg("user", "a"), _msg("assistant", "b")]
    prefix = StoredPrefix.of(save_conversation(key, base))
    header = AgentConversation.objects.get(workflow_id=key.workflow_id, generation=1, agent_node_id="agent")
    # A row already where the append writes (a damaged table) makes its INSERT fail.
    ConversationMessage.objects.create(
        conversation=header, position=3, role="user", data=_msg("user", "x"), hash=b"h", chain=b"c", size_bytes=1
    )
    with transaction.atomic():
        with CaptureQueriesContext(connection) as queries, pytest.raises(IntegrityError):
            append_conversation(key, [_msg("user", "d"), _msg("assistant", "e")], after=prefix)
        assert len(queries.captured_queries) == 2  # the savepoint, statement and release; the rollback to it
        # The caller's transaction is usable and the header's claim was undone with the savepoint.
        assert AgentConversation.objects.get(pk=header.pk).version == prefix.version
        Workflow.objects.filter(pk=key.workflow_id).update(name="still writing")
    assert Workflow.objects.get(pk=key.workflow_id).name == "still writing"
    assert ConversationMessage.objects.filter(conversation=header).count() == 4
