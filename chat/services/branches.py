"""Edit, Try again and Switch (docs/architecture.md#branch-moves): branch moves of the thread, and of the agents'
stored conversations.

A move takes every agent touched by the runs on the part being left back to the cursor the first such run
recorded (after checking the stored conversation still starts that way), keeps the conversations it rewinds as
snapshots under the left leaf, and — for a switch — restores the snapshots kept under the leaf it moves to. The
thread change and every conversation write happen in one transaction, under the session lock and the
conversation store's header locks (taken in the store's fixed key order).
"""

from __future__ import annotations

import json
import logging

from django.conf import settings
from django.db import transaction

from agents.selectors import chat_run_waits_for_approval
from chat.errors import refuse
from chat.events import publish_chat_updated
from chat.locks import chat_message_for_update
from chat.models import ChatBranchSnapshot, ChatMessage, ChatRun, ChatRunStep, ChatSession
from chat.services.attachments import message_files_meta
from chat.services.notes import chat_note_put, note_line
from chat.services.runs import (
    answering_target,
    chat_answer_start,
    chat_run_stop,
    chat_session_bump,
    chat_session_lock,
    check_lane,
    check_revision,
    check_text,
    sent_before,
    session_message,
)
from conversations import store
from conversations.selectors import conversation_exists

logger = logging.getLogger("chat.branches")


class Tree:
    """The session's messages as a parent map, read once per move."""

    def __init__(self, session: ChatSession):
        rows = ChatMessage.objects.filter(session=session).values_list("pk", "parent_id", "role")
        self.parent = {pk: parent for pk, parent, _ in rows}
        self.role = {pk: role for pk, _, role in rows}
        self.children: dict[int | None, list[int]] = {}
        for pk, parent, _ in rows:
            self.children.setdefault(parent, []).append(pk)
        self.leaf = session.active_leaf_id

    def path(self, leaf: int | None = None) -> list[int]:
        node = self.leaf if leaf is None else leaf
        out = []
        while node is not None:
            out.append(node)
            node = self.parent.get(node)
        return list(reversed(out))

    def below(self, top: int, leaf: int | None = None) -> list[int]:
        """The part of the path to `leaf` (default: the active one) from `top` down, or [] if top is not on it."""
        path = self.path(leaf)
        return path[path.index(top) :] if top in path else []

    def is_under(self, node: int, top: int) -> bool:
        while node is not None:
            if node == top:
                return True
            node = self.parent.get(node)
        return False

    def remembered_leaf(self, top: int, meta_leaf: int | None) -> int:
        if meta_leaf is not None and meta_leaf in self.parent and self.is_under(meta_leaf, top):
            return meta_leaf
        node = top
        while self.children.get(node):
            node = max(self.children[node])  # the newest version at each level
        return node


def _runs_on(part: list[int]) -> list[ChatRun]:
    return list(ChatRun.objects.filter(reply_message_id__in=part).order_by("id")) if part else []


def _first_cursors(runs: list[ChatRun]) -> dict[str, dict]:
    """Each agent's cursor from the first run (in path order, which is id order) that touched it."""
    cursors: dict[str, dict] = {}
    for run in runs:
        for agent, cursor in (run.context_cursors or {}).items():
            cursors.setdefault(agent, cursor)
    return cursors


def _snapshot_size(messages: list[dict]) -> int:
    return len(json.dumps(messages, ensure_ascii=False, separators=(",", ":")).encode())


def _keep_snapshot(session: ChatSession, leaf_id: int, agent: str, generation: int, messages: list[dict]) -> None:
    size = _snapshot_size(messages)
    ChatBranchSnapshot.objects.filter(session=session, leaf_message_id=leaf_id, agent_node_id=agent).delete()
    if size > settings.CHAT_MAX_SNAPSHOT_BYTES:
        # Too large to keep: the branch stays readable in the thread, but the agent cannot go back to it.
        logger.info("branch snapshot over the byte limit", extra={"session_id": session.pk, "bytes": size})
        return
    ChatBranchSnapshot.objects.create(
        session=session,
        leaf_message_id=leaf_id,
        agent_node_id=agent,
        generation=generation,
        messages=messages,
        size_bytes=size,
    )


def _trim_snapshots(session: ChatSession) -> None:
    limit = settings.CHAT_MAX_SNAPSHOTS_PER_SESSION
    stale = ChatBranchSnapshot.objects.filter(session=session).order_by("-id").values_list("pk", flat=True)[limit:]
    stale_ids = list(stale)
    if stale_ids:
        ChatBranchSnapshot.objects.filter(pk__in=stale_ids).delete()


def _move(
    session: ChatSession,
    workflow,
    *,
    left_part: list[int],
    left_leaf: int | None,
    target_leaf: int | None = None,
    target_part: list[int] | None = None,
) -> dict:
    """Rewind the agents of `left_part` (keeping snapshots under `left_leaf`) and restore those of `target_part`
    from the snapshots under `target_leaf`. Raises a refusal (and so rolls everything back) when it cannot."""

    live = workflow.live_generation
    left_runs = _runs_on(left_part)
    rewind = _first_cursors(left_runs)
    target_runs = _runs_on(target_part or [])
    restore_agents = sorted(_first_cursors(target_runs))
    for cursor in [*rewind.values(), *(r.context_cursors.get(a) for r in target_runs for a in r.context_cursors)]:
        if cursor and int(cursor.get("generation", live)) != live:
            raise refuse("older_generation")
    snapshots = {}
    if target_leaf is not None:
        for snap in ChatBranchSnapshot.objects.filter(
            session=session, leaf_message_id=target_leaf, agent_node_id__in=restore_agents
        ):
            snapshots[snap.agent_node_id] = snap
        missing = [a for a in restore_agents if a not in snapshots]
        if missing:
            raise refuse("branch_unavailable", agents=missing)
    agents = sorted(set(rewind) | set(restore_agents))
    keys = {agent: store.conversation_key(workflow.pk, live, agent) for agent in agents}
    # Only conversations that exist (or must be brought back) are locked: locking creates a header row, and an
    # agent without a Context has nothing stored to rewind.
    wanted = {a: k for a, k in keys.items() if conversation_exists(k) or (a in snapshots and snapshots[a].messages)}
    report = {"rewound": [], "restored": []}
    with store.lock_conversations(wanted.values()):
        current: dict[str, list[dict]] = {}
        for agent in agents:
            key = keys[agent]
            current[agent] = store.load_conversation_snapshot(key).messages if agent in wanted else []
        for agent, cursor in rewind.items():
            messages = current[agent]
            length = int(cursor.get("length", 0))
            if length and not store.starts_with(messages, cursor):
                raise refuse("cannot_rewind", agent_node_id=agent)
            if left_leaf is not None:
                _keep_snapshot(session, left_leaf, agent, live, messages)
            if len(messages) != length:
                store.replace_conversation_locked(keys[agent], messages[:length], reason="rewind")
                report["rewound"].append(agent)
            current[agent] = messages[:length]
        for agent in restore_agents:
            snap = snapshots[agent]
            base = store.conversation_cursor(current[agent])
            if not store.starts_with(snap.messages, base):
                raise refuse("branch_unavailable", agents=[agent])
            if agent in wanted and len(snap.messages) != len(current[agent]):
                store.replace_conversation_locked(keys[agent], snap.messages, reason="restore")
                report["restored"].append(agent)
        _trim_snapshots(session)
    _note_side_effects(session, left_runs)
    return report


def _note_side_effects(session: ChatSession, left_runs: list[ChatRun]) -> None:
    """Abandoned answers whose tool calls already took effect (a memory write stays written): tell the agent."""
    if not left_runs:
        return
    tools = sorted(
        set(ChatRunStep.objects.filter(run__in=left_runs).exclude(is_error=True).values_list("name", flat=True))
    )
    if not tools:
        return
    chat_note_put(
        session=session,
        key="branch",
        text=note_line(
            "branch",
            {
                "abandoned_answers": len(left_runs),
                "tools_that_ran": tools,
                "note": "The owner moved to another version of the conversation. Tool calls made in the "
                "answers left behind already took effect, though the conversation no longer shows them.",
            },
        ),
    )


def _remember_leaf(top_id: int, leaf_id: int | None) -> None:
    if leaf_id is None:
        return
    top = chat_message_for_update(top_id)
    top.meta = {**(top.meta or {}), "last_leaf_id": leaf_id}
    top.save(update_fields=["meta"])


def _check_current_generation(message: ChatMessage, workflow) -> None:
    if message.generation != workflow.live_generation:
        raise refuse("older_generation")


def _end_run_waiting_for_approval(
    workflow, *, expected_revision: int | None, client_message_id: str | None = None
) -> int | None:
    """A branch move while an answer waits for the owner's decision on a tool call ends that answer first, as Stop
    does (its waiting calls are answered `Not run`): the owner moved on. Not for a request the move will refuse
    as stale, nor for a retried one that already moved. Returns the revision the move now expects (the stop's own
    change of the thread is not a conflict)."""
    session = ChatSession.objects.filter(workflow=workflow).first()
    if session is None or (expected_revision is not None and int(expected_revision) != session.revision):
        return expected_revision
    if client_message_id and sent_before(session, client_message_id) is not None:
        return expected_revision
    run_id = (
        ChatRun.objects.filter(session=session, state__in=ChatRun.ACTIVE_STATES).values_list("pk", flat=True).first()
    )
    if run_id is None or not chat_run_waits_for_approval(chat_run_id=run_id):
        return expected_revision
    chat_run_stop(workflow=workflow, run_id=run_id)
    if expected_revision is None:
        return None
    return ChatSession.objects.filter(pk=session.pk).values_list("revision", flat=True).first()


# --- edit ---------------------------------------------------------------------------------------------------


def chat_message_edit(
    *,
    workflow,
    message_id,
    text: str,
    expected_revision: int | None = None,
    client_message_id: str | None = None,
    file_ids: list | None = None,
) -> tuple[ChatMessage, ChatRun]:
    """Put a new version of the owner's message beside it and answer that; the agents forget the old branch.

    The new version keeps the files of the one edited; `file_ids` (a list, even empty) replaces them."""
    expected_revision = _end_run_waiting_for_approval(
        workflow, expected_revision=expected_revision, client_message_id=client_message_id
    )
    with transaction.atomic():
        session = chat_session_lock(workflow=workflow)
        message = session_message(session, message_id)
        replayed = sent_before(session, client_message_id)
        if replayed is not None:
            return replayed
        if message.role != ChatMessage.Role.USER:
            raise refuse("not_editable", "Only your own messages can be edited.")
        text = check_text(text)
        meta = {"edit_of": message.pk}
        if file_ids is None:
            files = (message.meta or {}).get("files") or []
        else:
            files = message_files_meta(owner=workflow.owner_id, file_ids=file_ids)
        if files:
            meta["files"] = files
        check_revision(session, expected_revision)
        check_lane(session)
        tree = Tree(session)
        left_part = tree.below(message.pk)
        if not left_part:
            raise refuse("not_editable", "Switch to that version first, then edit it.")
        workflow.refresh_from_db(fields=["live_generation"])
        _check_current_generation(message, workflow)
        answering = answering_target(workflow=workflow)
        _move(session, workflow, left_part=left_part, left_leaf=tree.leaf)
        _remember_leaf(message.pk, tree.leaf)
        return chat_answer_start(
            session=session,
            workflow=workflow,
            kind=ChatRun.Kind.EDIT,
            answering=answering,
            text=text,
            parent_id=message.parent_id,
            client_message_id=client_message_id,
            meta=meta,
        )


# --- try again ----------------------------------------------------------------------------------------------


def chat_message_regenerate(*, workflow, message_id, expected_revision: int | None = None) -> ChatRun:
    """Answer the owner's message again beside the latest answer (only the latest one)."""
    with transaction.atomic():
        session = chat_session_lock(workflow=workflow)
        answer = session_message(session, message_id)
        if answer.role != ChatMessage.Role.ASSISTANT or answer.pk != session.active_leaf_id:
            raise refuse("not_editable", "Only the latest answer can be tried again.")
        check_revision(session, expected_revision)
        check_lane(session)
        workflow.refresh_from_db(fields=["live_generation"])
        _check_current_generation(answer, workflow)
        answering = answering_target(workflow=workflow)
        _move(session, workflow, left_part=[answer.pk], left_leaf=answer.pk)
        _remember_leaf(answer.pk, answer.pk)
        _, run = chat_answer_start(
            session=session,
            workflow=workflow,
            kind=ChatRun.Kind.REGENERATE,
            answering=answering,
            user_message=ChatMessage.objects.get(pk=answer.parent_id),
        )
    return run


# --- switch -------------------------------------------------------------------------------------------------


def chat_message_switch(*, workflow, message_id, expected_revision: int | None = None) -> ChatSession:
    """Show another version (`message_id`, a sibling of a message on the path) and bring its conversation back."""
    expected_revision = _end_run_waiting_for_approval(workflow, expected_revision=expected_revision)
    with transaction.atomic():
        session = chat_session_lock(workflow=workflow)
        target = session_message(session, message_id)
        check_revision(session, expected_revision)
        check_lane(session)
        tree = Tree(session)
        path = tree.path()
        if target.pk in path:
            return session  # already shown
        current = next((pk for pk in path if tree.parent.get(pk) == target.parent_id), None)
        if current is None or tree.role.get(current) != target.role:
            raise refuse("not_editable", "That version is not beside a message on the shown path.")
        workflow.refresh_from_db(fields=["live_generation"])
        _check_current_generation(target, workflow)
        target_leaf = tree.remembered_leaf(target.pk, (target.meta or {}).get("last_leaf_id"))
        left_part = tree.below(current)
        target_part = tree.below(target.pk, target_leaf)
        _move(
            session,
            workflow,
            left_part=left_part,
            left_leaf=tree.leaf,
            target_leaf=target_leaf,
            target_part=target_part,
        )
        _remember_leaf(current, tree.leaf)
        chat_session_bump(session, leaf=ChatMessage.objects.get(pk=target_leaf))
        publish_chat_updated(workflow_id=workflow.pk, revision=session.revision, reason="switch")
    return session
