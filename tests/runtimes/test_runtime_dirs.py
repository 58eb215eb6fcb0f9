"""Agent runtimes' directories under AGENT_RUNTIME_DIR go once nothing will use them (agents/services/runtime_dirs.py):
the real bundled Claude Code CLI against the fake Anthropic server, the cleanup after each commit."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.db import transaction

from agents.models import Firing
from agents.services.firings import firing_start
from agents.services.runtime_dirs import (
    conversation_dirs_remove,
    runtime_dirs_after_firing,
    runtime_dirs_on_archive,
)
from agents.services.runtime_paths import conversation_runtime_home
from conversations.models import RuntimeSessionBinding
from conversations.store import acquire_firing_lease, clear_conversation, conversation_key, release_firing_lease
from tests.agents.factories import assistant_with
from tests.fakes.base import Text, Turn

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

MODEL = "claude-sonnet-4-5"


def _fire(workflow, generation, agent, prompt) -> Firing:
    firing = Firing.objects.get(
        pk=firing_start(workflow=workflow, generation=generation, agent_node_id=agent, prompt=prompt)
    )
    assert firing.state == Firing.State.FINISHED, (firing.error_code, firing.error_message)
    return firing


def test_a_bound_session_keeps_only_its_config_and_clear_context_removes_the_directory(owner, anthropic_fake):
    workflow, generation, ids = assistant_with(owner, provider="claude_code", model=MODEL)
    home = conversation_runtime_home("claude_code", workflow.pk, generation, ids["lead"])
    anthropic_fake.push(Turn([Text("Noted.")]))
    _fire(workflow, generation, ids["lead"], "note this")

    # The session is bound: its transcript stays for the next firing; the run's working dir and process file go.
    binding = RuntimeSessionBinding.objects.get(workflow=workflow)
    assert Path(binding.transcript_path).is_file() and Path(binding.transcript_path).is_relative_to(home)
    assert sorted(p.name for p in home.iterdir()) == ["config"]

    clear_conversation(workflow, generation, ids["lead"])

    assert not home.exists()  # Clear Context: nothing of the cleared session is left on disk
    # and the next firing starts in a fresh directory of its own
    anthropic_fake.push(Turn([Text("Fresh start.")]))
    _fire(workflow, generation, ids["lead"], "hello again")
    assert (home / "config").is_dir()


def test_reset_removes_every_directory_of_the_ended_generation(owner, anthropic_fake):
    from workflows.services import workflow_reset

    workflow, generation, ids = assistant_with(owner, provider="claude_code", model=MODEL)
    anthropic_fake.push(Turn([Text("Hi.")]))
    _fire(workflow, generation, ids["lead"], "hi")
    home = conversation_runtime_home("claude_code", workflow.pk, generation, ids["lead"])
    # A directory of this generation that no stored conversation names (a run that failed before saving).
    stray = conversation_runtime_home("codex_cli", workflow.pk, generation, "gone-agent")
    stray.mkdir(parents=True)
    other_workflow, other_generation, other_ids = assistant_with(owner, provider="claude_code", model=MODEL)
    other = conversation_runtime_home("claude_code", other_workflow.pk, other_generation, other_ids["lead"])
    other.mkdir(parents=True)
    assert home.exists()

    with transaction.atomic():
        workflow.refresh_from_db()
        workflow_reset(workflow=workflow)

    assert not home.exists() and not stray.exists()
    assert other.exists()  # another workflow's directories are not touched


def test_a_firing_without_a_context_leaves_no_directory(owner, anthropic_fake, runtime_dir):
    workflow, generation, ids = assistant_with(owner, context=False, provider="claude_code", model=MODEL)
    anthropic_fake.push(Turn([Text("One-off.")]))
    firing = _fire(workflow, generation, ids["lead"], "just this once")
    assert firing.uses_conversation is False
    assert not (runtime_dir / "claude_code" / f"firing-{firing.pk}").exists()
    assert not list(runtime_dir.glob("claude_code/*"))


def test_a_directory_in_use_is_kept_and_missing_ones_are_fine(owner, runtime_dir):
    workflow, generation, ids = assistant_with(owner, provider="claude_code", model=MODEL)
    home = conversation_runtime_home("claude_code", workflow.pk, generation, ids["lead"])
    (home / "cwd").mkdir(parents=True)
    key = conversation_key(workflow.pk, generation, ids["lead"])
    assert acquire_firing_lease(key, owner_token="a-running-firing", ttl_seconds=60)

    conversation_dirs_remove(workflow_id=workflow.pk, generation=generation, agent_node_id=ids["lead"])
    runtime_dirs_after_firing(
        provider="claude_code",
        firing_id="00000000-0000-0000-0000-000000000000",
        uses_conversation=True,
        workflow_id=workflow.pk,
        generation=generation,
        agent_node_id=ids["lead"],
    )
    assert (home / "cwd").is_dir()  # the lease holder is using it: its own end cleans up

    release_firing_lease(key, owner_token="a-running-firing")
    conversation_dirs_remove(workflow_id=workflow.pk, generation=generation, agent_node_id=ids["lead"])
    assert not home.exists()
    # Already gone, never made, a firing's directory that never existed: all fine, nothing raised.
    conversation_dirs_remove(workflow_id=workflow.pk, generation=generation, agent_node_id=ids["lead"])
    runtime_dirs_after_firing(
        provider="codex_cli",
        firing_id=12345,
        uses_conversation=False,
        workflow_id=workflow.pk,
        generation=generation,
        agent_node_id=ids["lead"],
    )


def test_a_deleted_workflows_directories_go_after_the_archive_job_commits(owner, runtime_dir):
    workflow, generation, ids = assistant_with(owner, provider="claude_code", model=MODEL)
    homes = [
        conversation_runtime_home("claude_code", workflow.pk, generation, ids["lead"]),
        conversation_runtime_home("codex_cli", workflow.pk, generation + 1, "another"),
    ]
    for home in homes:
        (home / "config").mkdir(parents=True)
    with transaction.atomic():
        runtime_dirs_on_archive(workflow_id=workflow.pk, workflow=None, reason="workflow_deleted")
        assert all(home.exists() for home in homes)  # not before the commit
    assert not any(home.exists() for home in homes)


@pytest.mark.parametrize("how", ["stop", "start"])
def test_an_ended_generation_leaves_no_directory(owner, anthropic_fake, how):
    from django.db.models import F

    from workflows.models import Workflow
    from workflows.services import workflow_start, workflow_stop

    workflow, generation, ids = assistant_with(owner, provider="claude_code", model=MODEL)
    anthropic_fake.push(Turn([Text("Hi.")]))
    _fire(workflow, generation, ids["lead"], "hi")
    home = conversation_runtime_home("claude_code", workflow.pk, generation, ids["lead"])
    assert (home / "config").is_dir()  # bound: kept while the generation runs

    with transaction.atomic():
        if how == "stop":
            workflow_stop(workflow=Workflow.objects.get(pk=workflow.pk))
        else:  # a Start with a changed graph supersedes the running generation
            Workflow.objects.filter(pk=workflow.pk).update(revision=F("revision") + 1)
            _, started = workflow_start(workflow=Workflow.objects.get(pk=workflow.pk))
            assert started
        assert home.exists()  # not before the commit

    assert not home.exists()  # a new generation is a new conversation: the old session is never resumed
