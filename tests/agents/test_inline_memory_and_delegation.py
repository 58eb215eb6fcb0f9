"""Memory tool loops, teammate delegation and its limits, in-process."""

import json

import pytest

from agents.models import Firing
from agents.services.firings import firing_start
from agents.services.messages import firing_messages
from conversations.store import conversation_key, load_conversation
from tests.agents.factories import agent_node, assistant_with, edge, started_workflow

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def inline(settings):
    settings.AGENT_EXECUTION_MODE = "inline"


def _results(messages):
    return [b for m in messages for b in m["blocks"] if b["type"] == "tool_result"]


def test_remember_then_recall_across_firings(owner):
    workflow, generation, ids = assistant_with(owner, memory=True)
    first = Firing.objects.get(
        pk=firing_start(
            workflow=workflow,
            generation=generation,
            agent_node_id=ids["lead"],
            prompt="remember: the cat is called Miso",
        )
    )
    assert first.state == Firing.State.FINISHED, first.error_message
    second = Firing.objects.get(
        pk=firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="recall: cat")
    )
    assert second.state == Firing.State.FINISHED
    stored = load_conversation(conversation_key(workflow.pk, generation, ids["lead"]))
    remembered, recalled = _results(stored)
    assert not remembered["is_error"] and not recalled["is_error"]
    assert "Miso" in recalled["content"]
    assert "Miso" in second.final_text


def test_a_bad_memory_call_is_an_error_result_the_model_sees(owner):
    workflow, generation, ids = assistant_with(owner, memory=True)
    firing = Firing.objects.get(
        pk=firing_start(
            workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="remember: " + "x" * 20000
        )
    )
    assert firing.state == Firing.State.FINISHED
    (result,) = _results(firing_messages(firing))
    assert result["is_error"]
    assert json.loads(result["content"])["error"]["code"]


def _team(owner):
    nodes = [
        {"id": "trigger", "type": "chatTrigger", "params": {}},
        agent_node("lead", "Lead"),
        agent_node("a", "Alice"),
        agent_node("b", "Bob"),
        {"id": "c1", "type": "context", "params": {}},
        {"id": "c2", "type": "context", "params": {}},
        {"id": "c3", "type": "context", "params": {}},
    ]
    edges = [
        edge("trigger", "output-main", "lead", "input-main"),
        edge("a", "output-tool", "lead", "input-tools"),
        edge("b", "output-tool", "a", "input-tools"),
        edge("c1", "output-context", "lead", "input-context"),
        edge("c2", "output-context", "a", "input-context"),
        edge("c3", "output-context", "b", "input-context"),
    ]
    return started_workflow(owner, nodes, edges)


def test_delegation_two_levels_deep_keeps_separate_conversations(owner):
    workflow, generation, ids = _team(owner)
    firing = Firing.objects.get(
        pk=firing_start(
            workflow=workflow,
            generation=generation,
            agent_node_id=ids["lead"],
            prompt="ask alice: ask bob: count the sheep",
        )
    )
    assert firing.state == Firing.State.FINISHED, firing.error_message
    lead = load_conversation(conversation_key(workflow.pk, generation, ids["lead"]))
    alice = load_conversation(conversation_key(workflow.pk, generation, ids["a"]))
    bob = load_conversation(conversation_key(workflow.pk, generation, ids["b"]))
    assert [m["role"] for m in bob] == ["system", "user", "assistant"]
    assert bob[1]["blocks"][0]["text"] == "count the sheep"
    assert alice[1]["blocks"][0]["text"] == "ask bob: count the sheep"
    (alice_result,) = _results(alice)
    assert alice_result["content"] == bob[-1]["blocks"][0]["text"]  # a teammate's answer is the result, uncut
    (lead_result,) = _results(lead)
    assert lead_result["content"] == alice[-1]["blocks"][0]["text"]
    assert Firing.objects.filter(parent__isnull=False).count() == 2


def test_a_delegation_cycle_is_refused_with_a_message_to_the_model(owner):
    from workflows.models import WorkflowGeneration

    workflow, generation, ids = _team(owner)
    # Save refuses a teammate cycle (TEAMMATE_CYCLE); the runtime refuses one too, should a snapshot hold it.
    snapshot = WorkflowGeneration.objects.get(workflow=workflow, number=generation)
    snapshot.graph["edges"].append(edge(ids["a"], "output-tool", ids["b"], "input-tools"))
    snapshot.save(update_fields=["graph"])
    firing = Firing.objects.get(
        pk=firing_start(
            workflow=workflow,
            generation=generation,
            agent_node_id=ids["lead"],
            prompt="ask alice: ask bob: ask alice: hi",
        )
    )
    assert firing.state == Firing.State.FINISHED, firing.error_message
    bob = load_conversation(conversation_key(workflow.pk, generation, ids["b"]))
    (refused,) = _results(bob)
    assert refused["is_error"] and "cycle" in refused["content"]


def test_delegation_depth_is_limited(owner, settings):
    settings.AGENT_MAX_DELEGATION_DEPTH = 1
    workflow, generation, ids = _team(owner)
    firing_start(
        workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="ask alice: ask bob: count"
    )
    alice = load_conversation(conversation_key(workflow.pk, generation, ids["a"]))
    (refused,) = _results(alice)
    assert refused["is_error"] and "limited to 1" in refused["content"]


def test_max_iterations_ends_the_firing_with_the_reason_in_meta(owner):
    workflow, generation, ids = assistant_with(owner, todos=True, max_iterations=1)
    firing = Firing.objects.get(
        pk=firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="todo: one")
    )
    assert firing.state == Firing.State.FINISHED and firing.end_reason == "max_iterations"
    stored = load_conversation(conversation_key(workflow.pk, generation, ids["lead"]))
    last_assistant = [m for m in stored if m["role"] == "assistant"][-1]
    assert last_assistant["meta"]["end_reason"] == "max_iterations"
    assert stored[-1]["role"] == "tool"  # every call still has its answer


def test_an_unknown_agent_fails_the_firing_with_a_code(owner):
    workflow, generation, _ids = assistant_with(owner)
    firing = Firing.objects.get(
        pk=firing_start(workflow=workflow, generation=generation, agent_node_id="nope", prompt="hi")
    )
    assert firing.state == Firing.State.FAILED and firing.error_code == "agent_not_found"


def test_after_reset_a_firing_starts_fresh(owner):
    from workflows.services import workflow_reset

    workflow, generation, ids = assistant_with(owner)
    firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="before reset")
    outcome = workflow_reset(workflow=workflow, actor=owner)
    workflow.refresh_from_db()
    new_generation = workflow.live_generation
    assert new_generation == generation + 1, outcome
    fresh = Firing.objects.get(
        pk=firing_start(workflow=workflow, generation=new_generation, agent_node_id=ids["lead"], prompt="after reset")
    )
    assert [m["role"] for m in firing_messages(fresh)] == ["system", "user", "assistant"]
    assert load_conversation(conversation_key(workflow.pk, generation, ids["lead"])) == []


def test_pressure_past_the_threshold_compacts_the_turns_before_the_latest(owner):
    from conversations.models import UsageRecord
    from conversations.store import COMPACTION_SUMMARY_HEADER

    workflow, generation, ids = assistant_with(owner, compaction_threshold=0.1)
    key = conversation_key(workflow.pk, generation, ids["lead"])
    bulky = "background " * 1500  # ~4,000 tokens: past 10% of the offline model's window
    firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="first: " + bulky)
    assert [m["role"] for m in load_conversation(key)] == ["system", "user", "assistant"]  # nothing older: skipped
    firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="second: " + bulky)
    stored = load_conversation(key)
    assert [m["role"] for m in stored] == ["system", "user", "user", "assistant"]
    assert stored[0]["blocks"][0]["text"].startswith("You are Lead.")  # the system prompt, verbatim
    assert stored[1]["blocks"][0]["text"].startswith(COMPACTION_SUMMARY_HEADER)
    assert stored[2]["blocks"][0]["text"].startswith("second: ")  # the latest turn, verbatim
    assert UsageRecord.objects.filter(workflow_id=workflow.pk, kind="compaction").count() >= 1


def test_compaction_between_tool_steps_continues_from_the_compacted_list(owner, provider_requests):
    from conversations.store import COMPACTION_SUMMARY_HEADER

    workflow, generation, ids = assistant_with(owner, todos=True, compaction_threshold=0.1)
    key = conversation_key(workflow.pk, generation, ids["lead"])
    bulky = "background " * 1500
    firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="first: " + bulky)
    firing = Firing.objects.get(
        pk=firing_start(
            workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="todo: buy milk\n" + bulky
        )
    )
    assert firing.state == Firing.State.FINISHED, (firing.error_code, firing.error_message)
    stored = load_conversation(key)
    assert [m["role"] for m in stored] == ["system", "user", "user", "assistant", "tool", "assistant"]
    assert stored[1]["blocks"][0]["text"].startswith(COMPACTION_SUMMARY_HEADER)
    # The second request of the firing was built from the compacted list, not the long one.
    first_step, *_, second_step = [r for r in provider_requests if "todo: buy milk" in json.dumps(r)]
    assert not first_step[1]["blocks"][0]["text"].startswith(COMPACTION_SUMMARY_HEADER)
    assert second_step[1]["blocks"][0]["text"].startswith(COMPACTION_SUMMARY_HEADER)
    assert second_step[-1]["role"] == "tool" and len(second_step) < len(first_step) + 2


def test_a_summarizer_failure_between_tool_steps_ends_the_firing(owner, monkeypatch):
    import providers
    from providers.errors import ServerError

    workflow, generation, ids = assistant_with(owner, todos=True, compaction_threshold=0.1)
    bulky = "background " * 1500
    firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="first: " + bulky)

    def failing_summarizer(**_kwargs):
        raise ServerError("the summarizer is down")

    monkeypatch.setattr(providers, "summarize", failing_summarizer)
    firing = Firing.objects.get(
        pk=firing_start(
            workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="todo: buy milk\n" + bulky
        )
    )
    assert firing.state == Firing.State.FAILED and firing.error_code == "compaction_failed"
    stored = load_conversation(conversation_key(workflow.pk, generation, ids["lead"]))
    assert [m["role"] for m in stored][:3] == ["system", "user", "assistant"]  # the prior list is kept


def test_a_recall_query_is_embedded_before_the_turns_transaction(owner, settings, monkeypatch):
    # Tool calls are answered under the firing's row lock; an embedder may be a remote API, so the recall query is
    # embedded as soon as the answer is saved, outside any transaction, and the recall takes that vector.
    from django.db import connection

    from memory.models import MemoryItem
    from memory.tasks import embed_item
    from tests.memory.embedders import ConceptEmbedder

    settings.MEMORY_EMBEDDER = "tests.memory.embedders:ConceptEmbedder"
    workflow, generation, ids = assistant_with(owner, memory=True)
    firing_start(
        workflow=workflow,
        generation=generation,
        agent_node_id=ids["lead"],
        prompt="remember: my favourite drink is espresso",
    )
    for item_id in MemoryItem.objects.values_list("pk", flat=True):
        assert embed_item(item_id) == "ready"
    embedded = []
    real_embed = ConceptEmbedder.embed

    def watched_embed(self, texts):
        embedded.append((list(texts), connection.in_atomic_block))
        return real_embed(self, texts)

    monkeypatch.setattr(ConceptEmbedder, "embed", watched_embed)
    firing = Firing.objects.get(
        pk=firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="recall: coffee")
    )
    assert firing.state == Firing.State.FINISHED, firing.error_message
    recalled = _results(load_conversation(conversation_key(workflow.pk, generation, ids["lead"])))[-1]
    assert '"search": "hybrid"' in recalled["content"] and "espresso" in recalled["content"]
    assert embedded == [(["coffee"], False)]  # once, and outside every transaction
