"""Removing agent runtimes' directories once nothing will use them (AGENT_RUNTIME_DIR, see runtime_runs.py).

A runtime's directory holds what its CLI wrote: a throwaway working directory and process file per run and, for
Claude Code, its config and the session transcripts the next firing may resume. It is kept only while that can
happen:

- a firing without a Context (`firing-<id>`) is removed when the firing ends;
- a conversation's directory is removed when the firing ends unless a session binding still names it (Codex
  never binds, so always; Claude Code keeps only its config then, the working directory and process file go);
- Clear Context, Reset and a deleted workflow remove the directories of the conversations they clear, and a
  Reset every directory of the generation it ends; a Start that supersedes the live generation, or a Stop, removes
  the directories of that generation's agents (and a firing of an ended generation keeps nothing at its end).

Everything runs after the commit that made the directory useless, tolerates a directory already gone, and removes
a conversation's directory only while holding that conversation's firing lease for a moment: a firing that holds
the lease is using it (its own end cleans up), and a firing that starts meanwhile waits its ordinary lease retry.
"""

from __future__ import annotations

import logging
import shutil
import uuid
from pathlib import Path

from django.conf import settings
from django.db import transaction

from conversations import store
from conversations.selectors import runtime_session_binding
from conversations.store import conversation_key
from providers.types import RUNTIMES
from workflows.selectors import generation_is_live

from .runtime_paths import conversation_runtime_home, firing_runtime_home

logger = logging.getLogger("agents.runtime")

_CLEANUP_LEASE_SECONDS = 30
# What of a Claude Code directory is per run (recreated by the next run): gone when the run ends.
_PER_RUN = ("cwd", "proc")


def _runtimes() -> tuple[str, ...]:

    return RUNTIMES


def remove_dir(path: Path) -> bool:
    """Remove a directory tree; a missing one is fine. Never raises (a failure is logged and left for later)."""
    try:
        shutil.rmtree(path)
        return True
    except FileNotFoundError:
        return False
    except OSError:
        logger.warning("could not remove the runtime directory %s", path, exc_info=True)
        return False


def _under_lease(workflow_id: int, generation: int, agent_node_id: str, action) -> bool:
    """Run `action()` holding the conversation's firing lease; False (nothing done) when a firing holds it."""

    key = store.conversation_key(workflow_id, generation, agent_node_id)
    token = f"runtime-dirs:{uuid.uuid4().hex}"
    if not store.acquire_firing_lease(key, owner_token=token, ttl_seconds=_CLEANUP_LEASE_SECONDS):
        return False
    try:
        action()
    finally:
        store.release_firing_lease(key, owner_token=token)
    return True


def _bound_home(workflow_id: int, generation: int, agent_node_id: str, home: Path) -> bool:
    binding = runtime_session_binding(conversation_key(workflow_id, generation, agent_node_id))
    return binding is not None and Path(binding.transcript_path or "/").is_relative_to(home)


def _generation_live(workflow_id: int, generation: int) -> bool:
    """An ended generation's conversations are never continued (a new generation is a new key)."""
    return generation_is_live(workflow_id=workflow_id, number=generation)


def conversation_dirs_remove(*, workflow_id: int, generation: int, agent_node_id: str) -> None:
    """Remove the conversation's directory of every runtime (after a clear), unless a firing holds its lease."""
    for provider in _runtimes():
        home = conversation_runtime_home(provider, workflow_id, generation, agent_node_id)
        if home.exists():
            _under_lease(workflow_id, generation, agent_node_id, lambda home=home: remove_dir(home))


def runtime_dirs_after_firing(
    *, provider: str, firing_id, uses_conversation: bool, workflow_id: int, generation: int, agent_node_id: str
) -> None:
    """After a runtime firing's end committed: remove what no later firing will use."""
    if not uses_conversation:
        remove_dir(firing_runtime_home(provider, firing_id))
        return
    home = conversation_runtime_home(provider, workflow_id, generation, agent_node_id)
    if not home.exists():
        return

    def tidy() -> None:
        if _bound_home(workflow_id, generation, agent_node_id, home) and _generation_live(workflow_id, generation):
            for name in _PER_RUN:
                remove_dir(home / name)
        else:
            remove_dir(home)

    _under_lease(workflow_id, generation, agent_node_id, tidy)


def runtime_dirs_on_firing_end(firing) -> None:
    """Called by firing_end inside its transaction: schedule the cleanup for after the commit (ids only)."""

    provider = (firing.agent_config or {}).get("provider")
    if provider not in RUNTIMES:
        return
    values = dict(
        provider=provider,
        firing_id=firing.pk,
        uses_conversation=bool(firing.uses_conversation),
        workflow_id=firing.workflow_id,
        generation=firing.generation,
        agent_node_id=firing.agent_node_id,
    )
    transaction.on_commit(lambda: _never_raise(runtime_dirs_after_firing, **values))


def _never_raise(fn, **kwargs) -> None:
    try:
        fn(**kwargs)
    except Exception:
        logger.exception("runtime directory cleanup failed")


def runtime_dirs_on_conversation_change(change) -> None:
    """Conversation listener (after commit): a cleared conversation's runtime directories go with it."""
    if change.reason == "clear":
        conversation_dirs_remove(
            workflow_id=change.workflow_id, generation=change.generation, agent_node_id=change.agent_node_id
        )


def _generation_dirs_remove(*, workflow_id: int, generation: int | None) -> int:
    removed = 0
    pattern = f"{workflow_id}-{generation}-*" if generation is not None else f"{workflow_id}-*"
    for provider in _runtimes():
        for home in (Path(settings.AGENT_RUNTIME_DIR) / provider).glob(pattern):
            removed += remove_dir(home)
    return removed


def runtime_dirs_on_reset(*, workflow, previous_generation, new_generation, actor=None) -> None:
    """Reset listener: the ended generation's directories go after the reset commits (its firings are ended, so
    none will use them again)."""
    if previous_generation:
        workflow_id = workflow.pk
        transaction.on_commit(
            lambda: _never_raise(_generation_dirs_remove, workflow_id=workflow_id, generation=previous_generation)
        )


def runtime_dirs_on_archive(*, workflow_id, workflow, reason, context_node_ids=(), agent_node_ids=(), **_) -> None:
    """Archive listener: a deleted workflow's runtime directories go after the job commits."""
    if reason == "workflow_deleted":
        transaction.on_commit(
            lambda: _never_raise(_generation_dirs_remove, workflow_id=int(workflow_id), generation=None)
        )


def runtime_dirs_on_generation_end(*, workflow, generation) -> None:
    """Generation-end listener (a Start superseded it, or a Stop): after the commit, each agent's conversation
    directories of that generation go, unless a firing still holds the lease (its own end removes them then)."""
    workflow_id, number = workflow.pk, generation.number
    agents = [n.get("id") for n in (generation.graph or {}).get("nodes", []) if n.get("type") == "agent"]

    def remove() -> None:
        for agent_node_id in agents:
            conversation_dirs_remove(workflow_id=workflow_id, generation=number, agent_node_id=agent_node_id)

    transaction.on_commit(lambda: _never_raise(remove))
