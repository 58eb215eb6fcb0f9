"""Compaction under steady traffic (docs/invariants.md#compaction): one summary per conversation at a time, landed on
whatever was appended after its snapshot, before the byte cap, and never a request the window cannot hold.

Firings run in-process; `agent.compact_context` is held instead of run (`held`), so a test decides when a summary
"finishes" relative to the turns sent meanwhile, which is what a worker pool does with a slow summary."""

import json

import pytest

from agents import dispatch
from agents.models import Firing
from agents.services.compaction import compact_context
from agents.services.firings import firing_start
from conversations.models import AgentConversation, ConversationCompaction, UsageRecord
from conversations.store import (
    COMPACTION_SUMMARY_HEADER,
    conversation_key,
    load_conversation,
    load_conversation_snapshot,
    save_conversation,
)
from providers.catalogue import CATALOGUE_PATH
from providers.token_estimate import CHARS_PER_TOKEN
from tests.agents.factories import assistant_with
from tests.fakes import FakeChatCompletions, Text, Turn

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def held(settings, monkeypatch):
    settings.AGENT_EXECUTION_MODE = "inline"
    kept: list[tuple] = []
    monkeypatch.setitem(dispatch._steps, "agent.compact_context", lambda *args: kept.append(args))
    return kept


@pytest.fixture
def during_summary(monkeypatch):
    """Things to do while the next summary call runs (after its snapshot, before it lands): turns that keep coming,
    an edit by the owner."""
    import providers

    actions: list = []
    original = providers.summarize

    def summarize(**kwargs):
        while actions:
            actions.pop(0)()
        return original(**kwargs)

    monkeypatch.setattr(providers, "summarize", summarize)
    return actions


def run_held(held) -> int:
    ran = 0
    while held:
        compact_context(*held.pop(0))
        ran += 1
    return ran


@pytest.fixture
def window(tmp_path, monkeypatch):
    """Give `provider`'s unknown models (and the offline one) a window of `tokens` and an output of `output`."""

    def set_window(tokens: int, *, provider: str = "offline", output: int = 1000) -> None:
        catalogue = json.loads(CATALOGUE_PATH.read_text())
        catalogue[provider]["*"] = {**catalogue[provider]["*"], "context_window": tokens, "max_output_tokens": output}
        path = tmp_path / f"catalogue-{provider}-{tokens}.json"
        path.write_text(json.dumps(catalogue))
        monkeypatch.setenv("PROVIDER_CATALOGUE_PATH", str(path))

    return set_window


def words(n: int, tag: str) -> str:
    """About `n` characters of prose, in lines (a summary keeps lines), tagged so a turn can be found again."""
    line = f"{tag} " + "lorem ipsum dolor sit amet " * 6
    return "\n".join([line] * max(1, n // len(line)))


def _strip_ts(messages):
    return [{k: v for k, v in m.items() if k != "ts"} for m in messages]


def _summaries(stored):
    return [m for m in stored if (m.get("meta") or {}).get("compaction_summary")]


def three_big_turns(workflow, generation, agent):
    """Three turns of ~2,500 tokens each (the offline agent echoes the message): the third one takes the projected
    next request past 80% of an 8,000-token window."""
    for n in range(3):
        firing = Firing.objects.get(
            pk=firing_start(
                workflow=workflow, generation=generation, agent_node_id=agent, prompt=words(5000, f"turn{n}")
            )
        )
        assert firing.state == Firing.State.FINISHED, firing.error_message


def _slot(key):
    return ConversationCompaction.objects.get(
        workflow_id=key.workflow_id, generation=key.generation, agent_node_id=key.agent_node_id
    )


def test_a_long_lived_agent_on_a_big_window_model_keeps_answering_under_the_byte_cap(owner, window, held, settings):
    window(1_000_000)
    workflow, generation, ids = assistant_with(owner)
    key = conversation_key(workflow.pk, generation, ids["lead"])
    cap = settings.CONVERSATION_SEED_MAX_BYTES
    for n in range(150):
        firing = Firing.objects.get(
            pk=firing_start(
                workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt=words(6000, f"turn{n}")
            )
        )
        assert firing.state == Firing.State.FINISHED, (n, firing.error_code, firing.error_message)
        run_held(held)  # the summary finishes before the next turn
        size = AgentConversation.objects.get().size_bytes
        assert size < cap, (n, size)
    stored = load_conversation(key)
    assert len(_summaries(stored)) == 1 and stored[-1]["role"] == "assistant"
    assert _slot(key).landed >= 2 and _slot(key).discarded == 0


def test_a_summary_that_finishes_after_two_more_turns_lands_and_keeps_them_verbatim(
    owner, window, held, during_summary
):
    window(8000, output=200)
    workflow, generation, ids = assistant_with(owner)
    key = conversation_key(workflow.pk, generation, ids["lead"])
    three_big_turns(workflow, generation, ids["lead"])
    assert len(held) == 1  # the third turn crossed 80% of the window: one summary asked for
    snapshot_list = load_conversation(key)
    latest_at_snapshot = snapshot_list[-2:]  # the third turn: its question and answer

    def two_more_turns():  # while the summary runs (nothing new is queued: the slot is taken)
        for n in (3, 4):
            firing = Firing.objects.get(
                pk=firing_start(
                    workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt=f"turn{n} short"
                )
            )
            assert firing.state == Firing.State.FINISHED, firing.error_message

    during_summary.append(two_more_turns)
    run_held(held)

    assert held == []
    stored = load_conversation(key)
    appended = [m for m in stored if "short" in json.dumps(m)]
    assert len(appended) == 4  # both questions and both answers
    assert stored[0]["role"] == "system"
    assert stored[1]["blocks"][0]["text"].startswith(COMPACTION_SUMMARY_HEADER)
    summary = stored[1]["blocks"][0]["text"]
    assert "turn1" in summary and "turn2" not in summary  # of the first two turns (the offline one keeps the last)
    assert stored[2:] == [*latest_at_snapshot, *appended]  # verbatim, ts included
    assert _slot(key).landed == 1 and _slot(key).summaries == 1
    assert not UsageRecord.objects.filter(kind="compaction", outcome="discarded").exists()


def test_a_summary_finishing_mid_turn_is_landed_by_that_turn(owner, window, held, monkeypatch):
    """The summary finishes while a firing holds the lease: it waits in the slot and that firing lands it at its save,
    its own turn kept after the summary."""
    from providers import ChatUnifier

    window(8000, output=200)
    workflow, generation, ids = assistant_with(owner)
    key = conversation_key(workflow.pk, generation, ids["lead"])
    three_big_turns(workflow, generation, ids["lead"])
    assert len(held) == 1
    original = ChatUnifier.chat

    def chat_while_the_summary_finishes(self, request, on_event=None, should_stop=None):
        if held:
            run_held(held)  # mid-turn: the lease is this firing's, so the summary cannot land yet
            assert _slot(key).state == "ready"
        return original(self, request, on_event=on_event, should_stop=should_stop)

    monkeypatch.setattr(ChatUnifier, "chat", chat_while_the_summary_finishes)
    firing = Firing.objects.get(
        pk=firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="turn3 short")
    )
    assert firing.state == Firing.State.FINISHED, firing.error_message
    stored = load_conversation(key)
    assert stored[1]["blocks"][0]["text"].startswith(COMPACTION_SUMMARY_HEADER)
    assert [m["role"] for m in stored[2:]] == ["user", "assistant", "user", "assistant"]
    assert "turn3 short" in json.dumps(stored[-2])
    assert _slot(key).state == "idle" and _slot(key).landed == 1


def test_an_edit_inside_the_summarised_prefix_discards_the_summary_and_the_ledger_says_so(
    owner, window, held, during_summary
):
    window(8000, output=200)
    workflow, generation, ids = assistant_with(owner)
    key = conversation_key(workflow.pk, generation, ids["lead"])
    three_big_turns(workflow, generation, ids["lead"])
    assert len(held) == 1
    stored = load_conversation_snapshot(key).messages
    edited = [*stored[:1], {**stored[1], "blocks": [{"type": "text", "text": "edited first question"}]}, *stored[2:]]
    # What a chat edit of the first message does to the stored list, while the summary runs.
    during_summary.append(lambda: save_conversation(key, edited))

    run_held(held)

    after = load_conversation(key)
    assert not _summaries(after) and _strip_ts(after) == _strip_ts(edited)
    slot = _slot(key)
    assert (slot.summaries, slot.landed, slot.discarded, slot.state) == (1, 0, 1, "idle")
    outcomes = list(UsageRecord.objects.filter(kind="compaction").values_list("outcome", flat=True))
    assert sorted(outcomes) == ["discarded", "ok"]  # the call billed once, and recorded as discarded
    # The run history shows the discarded summary and why.
    from django.test import Client
    from django.urls import reverse

    client = Client()
    client.force_login(owner)
    html = client.get(reverse("workflow-runs", args=[workflow.pk])).content.decode()
    assert 'data-outcome="discarded"' in html and "discarded: the summarised turns changed" in html
    # The next turn over the threshold asks for a new summary (the slot is free again).
    firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt=words(1000, "turn3"))
    assert len(held) == 1


def test_a_burst_of_ten_turns_queues_one_compaction(owner, window, held):
    window(9000, output=200)  # room for the ten turns: none of them waits
    workflow, generation, ids = assistant_with(owner)
    three_big_turns(workflow, generation, ids["lead"])
    for n in range(10):
        firing = Firing.objects.get(
            pk=firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt=f"burst {n}")
        )
        assert firing.state == Firing.State.FINISHED, firing.error_message
    assert len(held) == 1
    run_held(held)
    assert UsageRecord.objects.filter(kind="compaction").count() == 1


def test_a_firing_over_the_window_waits_for_the_pending_compaction(owner, window, held, provider_requests):
    window(8000, output=200)
    workflow, generation, ids = assistant_with(owner)
    key = conversation_key(workflow.pk, generation, ids["lead"])
    three_big_turns(workflow, generation, ids["lead"])
    assert len(held) == 1
    sent_before = len(provider_requests)
    # This message would take the request past the window: the firing waits, no request is sent.
    waiting = Firing.objects.get(
        pk=firing_start(
            workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt=words(4000, "turn3")
        )
    )
    assert waiting.state == Firing.State.RUNNING and waiting.compaction_pending and waiting.iteration == 0
    assert len(provider_requests) == sent_before
    assert _slot(key).waiting_firing_id == waiting.pk

    run_held(held)  # the summary lands and continues the firing

    waiting.refresh_from_db()
    assert waiting.state == Firing.State.FINISHED, waiting.error_message
    request = provider_requests[-1]
    assert request[1]["blocks"][0]["text"].startswith(COMPACTION_SUMMARY_HEADER)
    assert "turn3" in json.dumps(request[-1])
    assert len(json.dumps(request)) / CHARS_PER_TOKEN < 8000


def test_a_firing_over_the_window_with_no_compaction_running_compacts_before_its_first_step(owner, window, held):
    window(8000, output=200)
    workflow, generation, ids = assistant_with(owner, compaction_threshold=0.95)  # the turns stay under it
    for n in range(2):
        firing_start(
            workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt=words(5000, f"turn{n}")
        )
    assert held == []
    waiting = Firing.objects.get(
        pk=firing_start(
            workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt=words(12000, "turn2")
        )
    )
    assert waiting.compaction_pending and len(held) == 1 and held[0][3] == str(waiting.pk)
    run_held(held)
    waiting.refresh_from_db()
    assert waiting.state == Firing.State.FINISHED, waiting.error_message


def test_a_single_turn_too_long_for_the_window_ends_with_the_clear_error_and_the_store_unchanged(
    owner, window, held, provider_requests
):
    window(4000, output=200)
    workflow, generation, ids = assistant_with(owner)
    key = conversation_key(workflow.pk, generation, ids["lead"])
    firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="hello")
    before = AgentConversation.objects.values_list("version", "digest", "message_count").get()
    sent = len(provider_requests)
    firing = Firing.objects.get(
        pk=firing_start(
            workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt=words(20000, "huge")
        )
    )
    assert firing.state == Firing.State.FAILED and firing.error_code == "context_window_exceeded"
    assert firing.error_message == (
        "This message and the conversation's latest turn are too long for offline-echo's window."
    )
    assert len(provider_requests) == sent and held == []
    assert AgentConversation.objects.values_list("version", "digest", "message_count").get() == before
    assert [m["role"] for m in load_conversation(key)] == ["system", "user", "assistant"]


def test_back_to_back_turns_under_a_small_window_never_send_more_than_it_holds(
    owner, window, held, during_summary, monkeypatch
):
    """Turns keep coming while each summary runs (two turns go by during each one): every request the provider's
    fake received fits the window, every summary lands, none is discarded."""
    window(8000, provider="openai_compatible", output=200)
    with FakeChatCompletions() as fake:
        monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", "sk-test-0123456789abcdef")
        monkeypatch.setenv("OPENAI_COMPATIBLE_BASE_URL", fake.base_url)
        fake.push(*[Turn([Text("Noted, thank you; go on.")]) for _ in range(200)])
        workflow, generation, ids = assistant_with(owner, provider="openai_compatible", model="small-window")
        key = conversation_key(workflow.pk, generation, ids["lead"])
        fired: list = []

        def turn() -> None:
            if Firing.objects.filter(compaction_pending=True).exists():
                return  # waiting for this summary, it holds the lease: a next turn would queue behind it
            n = len(fired)
            fired.append(
                firing_start(
                    workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt=words(3000, f"turn{n}")
                )
            )

        while len(fired) < 40:
            turn()
            if held:
                during_summary.extend([turn, turn])
                run_held(held)
        states = Firing.objects.filter(pk__in=fired).values_list("state", "error_message")
        assert {state for state, _ in states} == {Firing.State.FINISHED}, list(states)
        chats = [r.body for r in fake.requests if isinstance(r.body, dict) and "messages" in r.body]
        sizes = [len(json.dumps(body["messages"])) / CHARS_PER_TOKEN for body in chats]
        assert max(sizes) <= 8000, max(sizes)
        slot = _slot(key)
        assert slot.landed >= 3 and slot.discarded == 0
        assert slot.summaries == slot.landed
        assert Firing.objects.filter(pk__in=fired, iteration=1).count() == len(fired)
