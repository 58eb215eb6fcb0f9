"""A firing's message list without a copy of the conversation.

The request a step sends is the stored list the firing extends plus the messages it added and has not saved yet
(docs/invariants.md#store-observes: the request is always built from the firing's list; the store only says where
to save). What the firing row holds is therefore the size of its own turn, never of the conversation: each save
appends the unsaved messages after the stored prefix the firing knows and empties them. Whatever another process
runs next rebuilds the list from the store's copy (this process's, when the previous step ran here) or one read.
"""

from __future__ import annotations

import logging

from agents.models import Firing
from agents.services.firings import firing_key, firing_mark_changed
from conversations import store

logger = logging.getLogger("agents.step")


def _store():

    return store


def firing_messages(firing: Firing) -> list[dict]:
    """The list the next provider request is built from. Raises the store's ConversationConflict when the stored
    list this firing extends is gone and nothing kept it (see conversations/store/retained.py)."""
    prefix = firing.stored_prefix or {}
    head: list[dict] = []
    if "length" in prefix:
        store = _store()
        head = store.conversation_prefix_messages(firing_key(firing), store.StoredPrefix.from_dict(prefix))
    return [*head, *firing.pending_messages]


def firing_messages_seed(firing: Firing, *, snapshot, repaired: list[dict], seeded: list[dict]) -> None:
    """Record the seeded list (`seeded` = [system, ...repaired minus system, user]) as prefix + unsaved messages.

    When the stored list is kept as it is at the head of `seeded` (one system message, first, unchanged, and a
    repair that only appended closing results), the firing names it and keeps only what follows. Otherwise the
    first save rewrites the stored list, and the whole seeded list is the firing's until then.
    """
    store = _store()
    if not firing.uses_conversation:
        firing.stored_prefix, firing.pending_messages = None, seeded
        return
    raw = snapshot.messages
    if not raw:
        firing.stored_prefix = store.StoredPrefix.of_snapshot(snapshot).as_dict()
        firing.pending_messages = seeded
        return
    systems = [i for i, m in enumerate(raw) if m.get("role") == "system"]
    # A repaired list (closing results for calls a crash left open) is rare; it is saved as a rewrite.
    if systems == [0] and raw[0].get("blocks") == seeded[0].get("blocks") and repaired is raw:
        firing.stored_prefix = store.StoredPrefix.of_snapshot(snapshot).as_dict()
        firing.pending_messages = [seeded[-1]]
    else:
        firing.stored_prefix = {"replaces": snapshot.version}
        firing.pending_messages = seeded


def firing_append(firing: Firing, new_messages: list[dict], *, context: list[dict] = ()) -> None:
    """Add messages to a locked firing's list and, with a Context, save them (never raising for a billed turn).

    `context`: the message before `new_messages` when they start with tool results (validation pairs them)."""
    firing.pending_messages = [*firing.pending_messages, *new_messages]
    firing_mark_changed(firing, "pending_messages")
    if firing.uses_conversation:
        save_pending(firing, context=context)


def save_pending(firing: Firing, *, context: list[dict] = ()) -> None:
    """Save the firing's unsaved messages after the stored list it extends; empty them when saved.

    A stored list that moved on under the firing (the owner cleared the Context, a branch move rewound it)
    detaches the firing: it finishes its turn from the list it was sending and saves nothing over the new one.
    Any other failure is logged and the messages stay unsaved, so the next save appends them too
    (docs/invariants.md#save-failures: a failed save after a billed call never fails the turn).
    """
    store = _store()
    prefix = firing.stored_prefix or {}
    if prefix.get("detached") or not firing.pending_messages:
        return
    key = firing_key(firing)
    try:
        if "length" in prefix:
            result = store.append_conversation(
                key, firing.pending_messages, after=store.StoredPrefix.from_dict(prefix), context=context
            )
        else:
            result = store.save_conversation(key, firing.pending_messages, expected_version=prefix.get("replaces"))
    except store.ConversationConflict:
        logger.info("conversation changed during the turn; not saved over it", extra=key.as_log())
        firing.stored_prefix = {**prefix, "detached": True}
        firing_mark_changed(firing, "stored_prefix")
        return
    except Exception as exc:
        logger.exception("conversation save failed", extra={**key.as_log(), "error_type": type(exc).__name__})
        return
    firing.stored_prefix = store.StoredPrefix.of(result).as_dict()
    firing.pending_messages = []
    firing_mark_changed(firing, "stored_prefix", "pending_messages")


def firing_messages_rewrite(firing: Firing, messages: list[dict]) -> None:
    """Make `messages` the firing's whole list (a change inside what is already stored: rare, e.g. an end reason on
    the last answer, or old tool results cleared past the budget); saved with a check that the stored list is still
    the one the firing extends."""
    prefix = firing.stored_prefix or {}
    if firing.uses_conversation and not prefix.get("detached"):
        base = prefix["version"] if "length" in prefix else prefix.get("replaces")
        firing.stored_prefix = {"replaces": base}
    elif firing.uses_conversation:
        firing.stored_prefix = {"replaces": None, "detached": True}  # nothing is saved any more
    firing.pending_messages = messages
    firing_mark_changed(firing, "stored_prefix", "pending_messages")
    save_pending(firing)
