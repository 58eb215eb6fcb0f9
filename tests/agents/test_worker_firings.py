"""Firings through a real broker and real Celery worker processes, including workers that die."""

from __future__ import annotations

import signal
import threading

import psycopg
import pytest
import redis
from django.conf import settings as django_settings

from agents.models import Firing, LlmStep
from agents.services.firings import firing_start
from conversations.models import UsageRecord
from conversations.store import conversation_key, load_conversation
from providers.wire import validate_messages
from tests.agents.factories import agent_node, assistant_with, edge, started_workflow
from tests.processes import database_url_for_tests, start_celery_worker
from tests.race import waiting_on_a_lock
from tests.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

FAST_WATCHDOG = {
    "AGENT_WATCHDOG_INTERVAL_SECONDS": "1",
    "AGENT_STEP_HEARTBEAT_SECONDS": "0.5",
    "AGENT_STEP_LOST_AFTER_SECONDS": "3",
    "AGENT_PERSIST_GRACE_SECONDS": "2",
}


def firing_state(firing_id) -> Firing:
    return Firing.objects.get(pk=firing_id)


def wait_for_end(firing_id, timeout: float = 60) -> Firing:
    return wait_until(
        lambda: (f := firing_state(firing_id)).is_terminal and f, timeout=timeout, what=f"firing {firing_id} to end"
    )


@pytest.fixture
def worker(tmp_path):
    process = start_celery_worker(tmp_path)
    yield process
    process.stop()


def kill_when_blocked(worker, *, hold_sql: str, params: list, blocked_query_like: str, what: str, before_block=None):
    """Hold a row lock (`hold_sql`) until the worker blocks on it in a statement like `blocked_query_like`, kill the
    worker right there (SIGKILL, its pool children with it), then release the lock. `before_block` runs while the
    lock is held, before the wait (what the test waits for first)."""
    blocker = psycopg.connect(database_url_for_tests(), autocommit=False)
    try:
        blocker.execute(hold_sql, params)
        if before_block is not None:
            before_block()
        wait_until(lambda: waiting_on_a_lock(query_like=blocked_query_like), timeout=30, what=what)
        worker.kill(signal.SIGKILL)
        worker.process.wait(timeout=10)
    finally:
        blocker.rollback()
        blocker.close()
        worker.stop()


def _blocks(messages, kind):
    return [b for m in messages for b in m["blocks"] if b["type"] == kind]


def stopped_with_no_step_left_behind(worker, firing_id) -> None:
    """Instead of sleeping "long enough" for a duplicate to show up: stop the worker (a warm shutdown finishes what
    it runs), then check the broker holds no message of this firing, waiting or taken and unacknowledged. What ran
    is in the database; what could still run would be in one of those places."""
    worker.stop()
    client = redis.Redis.from_url(django_settings.REDIS_URL)
    marker = str(firing_id).encode()
    queues = [key for key in client.scan_iter("agent*") if client.type(key) == b"list"]
    waiting = [message for key in queues for message in client.lrange(key, 0, -1)]
    taken = client.hvals("unacked") if client.type("unacked") == b"hash" else []
    assert [m for m in [*waiting, *taken] if marker in m] == [], "a step of the firing is still on its way"


def test_a_memory_tool_loop_on_a_real_worker_stores_the_exact_turns(owner, worker):
    workflow, generation, ids = assistant_with(owner, memory=True)
    key = conversation_key(workflow.pk, generation, ids["lead"])
    firing = wait_for_end(
        firing_start(
            workflow=workflow,
            generation=generation,
            agent_node_id=ids["lead"],
            prompt="remember: the launch is on Friday",
        )
    )
    assert firing.state == Firing.State.FINISHED, (firing.error_code, worker.log()[-2000:])
    stored = load_conversation(key)
    assert [m["role"] for m in stored] == ["system", "user", "assistant", "tool", "assistant"]
    # The ended firing keeps no list of its own: it names the stored list its turn ended at.
    assert firing.pending_messages == [] and firing.stored_prefix["length"] == len(stored)
    (call,) = _blocks(stored, "tool_call")
    (result,) = _blocks(stored, "tool_result")
    assert call["name"] == "memory" and call["arguments"]["content"] == "the launch is on Friday"
    assert result["tool_call_id"] == call["id"] and not result["is_error"]
    assert stored[-1]["blocks"][0]["text"] == firing.final_text

    second = wait_for_end(
        firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="what did I say?")
    )
    assert second.state == Firing.State.FINISHED
    again = load_conversation(key)
    assert again[:5] == stored and [m["role"] for m in again[5:]] == ["user", "assistant"]
    assert "I see 4 earlier messages" in second.final_text


def _lead_delegating_to_a_teammate_with_memory(owner):
    nodes = [
        {"id": "trigger", "type": "chatTrigger", "params": {}},
        agent_node("lead", "Lead"),
        agent_node("a", "Alice"),
        {"id": "c1", "type": "context", "params": {}},
        {"id": "c2", "type": "context", "params": {}},
        {"id": "mem", "type": "simpleMemory", "params": {"reset_policy": "keep"}},
    ]
    edges = [
        edge("trigger", "output-main", "lead", "input-main"),
        edge("a", "output-tool", "lead", "input-tools"),
        edge("mem", "output-tool", "a", "input-tools"),
        edge("c1", "output-context", "lead", "input-context"),
        edge("c2", "output-context", "a", "input-context"),
    ]
    return started_workflow(owner, nodes, edges)


def test_task_payloads_carry_ids_only(owner, worker):
    """Watch every command Redis receives during a firing: no prompt, no tool result, no message list.

    Steps of one firing continue in the worker that ran the previous one; what crosses the broker is a firing's
    start and a teammate's return to its parent (`agent.persist_turn`), so the firing delegates to a teammate
    that runs a memory tool loop.
    """
    workflow, generation, ids = _lead_delegating_to_a_teammate_with_memory(owner)
    canary = "CANARY-7f3a-payload"
    seen: list[str] = []
    monitor_client = redis.Redis.from_url(django_settings.REDIS_URL)
    stop, listening = threading.Event(), threading.Event()

    def monitor():
        with monitor_client.monitor() as m:
            listening.set()  # MONITOR was acknowledged: every command from now on is seen
            for command in m.listen():
                seen.append(command["command"])
                if stop.is_set():
                    return

    thread = threading.Thread(target=monitor, daemon=True)
    thread.start()
    assert listening.wait(10)
    firing = wait_for_end(
        firing_start(
            workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt=f"ask alice: remember: {canary}"
        )
    )
    stop.set()
    redis.Redis.from_url(django_settings.REDIS_URL).ping()  # wakes the monitor so it can exit
    thread.join(timeout=5)
    assert firing.state == Firing.State.FINISHED, (firing.error_code, worker.log()[-2000:])
    child = Firing.objects.get(parent_id=firing.pk)
    assert child.state == Firing.State.FINISHED and canary in child.prompt
    child_stored = load_conversation(conversation_key(workflow.pk, generation, child.agent_node_id))
    assert [m["role"] for m in child_stored][-3:] == ["assistant", "tool", "assistant"]  # the memory loop
    broker_traffic = "\n".join(seen)
    assert "agent.prepare_payload" in broker_traffic and "agent.persist_turn" in broker_traffic
    assert canary not in broker_traffic
    assert "tool_result" not in broker_traffic and '"blocks"' not in broker_traffic


def test_a_worker_killed_mid_call_leaves_an_ambiguous_step_and_no_second_call(owner, tmp_path):
    calls = tmp_path / "provider-calls.log"
    slow = {"OFFLINE_PROVIDER_DELAY_MS": "700", "OPENCOMPANY_OFFLINE_CALL_LOG": str(calls), **FAST_WATCHDOG}
    first = start_celery_worker(tmp_path, name="doomed", **slow)
    try:
        workflow, generation, ids = assistant_with(owner)
        key = conversation_key(workflow.pk, generation, ids["lead"])
        wait_for_end(
            firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="warm up"),
            timeout=60,
        )
        calls.write_text("")
        firing_id = firing_start(
            workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="tell me a long story please"
        )
        wait_until(lambda: calls.exists() and calls.read_text().count("\n") == 1, timeout=30, what="the provider call")
        assert LlmStep.objects.get(firing_id=firing_id).state == LlmStep.State.STARTED
        first.kill(signal.SIGKILL)
        first.process.wait(timeout=10)
    finally:
        first.stop()
    rescuer = start_celery_worker(tmp_path, name="rescuer", beat=True, **slow)
    try:
        firing = wait_for_end(firing_id, timeout=30)
    finally:
        rescuer.stop()
    assert firing.state == Firing.State.FAILED and firing.error_code == "interrupted"
    assert calls.read_text().count("\n") == 1  # no second provider call
    step = LlmStep.objects.get(firing_id=firing_id)
    assert step.state == LlmStep.State.AMBIGUOUS
    assert UsageRecord.objects.filter(idempotency_key=f"llm-step:{step.pk}", outcome="ambiguous").count() == 1
    stored = load_conversation(key)
    validate_messages(stored)
    assert [m["role"] for m in stored] == ["system", "user", "assistant"]  # the warm-up turn, intact


def test_a_worker_killed_inside_persist_turn_saves_the_turn_exactly_once(owner, tmp_path):
    first = start_celery_worker(tmp_path, name="doomed", OFFLINE_PROVIDER_DELAY_MS="300", **FAST_WATCHDOG)
    workflow, generation, ids = assistant_with(owner)
    key = conversation_key(workflow.pk, generation, ids["lead"])
    firing_id = firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="hello worker")
    wait_until(lambda: LlmStep.objects.filter(firing_id=firing_id).exists(), timeout=30, what="the step to start")
    # Hold the firing row so persist_turn blocks inside its transaction, then kill the worker right there.
    kill_when_blocked(
        first,
        hold_sql="select 1 from agents_firing where id = %s for update",
        params=[str(firing_id)],
        # The long SELECT ... FOR UPDATE is cut short in pg_stat_activity, so match its start.
        blocked_query_like='SELECT "agents_firing".%',
        what="persist_turn to block on the firing row",
        before_block=lambda: wait_until(
            lambda: LlmStep.objects.filter(firing_id=firing_id, state=LlmStep.State.COMPLETED).exists(),
            timeout=30,
            what="the provider answer",
        ),
    )
    assert firing_state(firing_id).state == Firing.State.RUNNING  # nothing was saved by the killed worker
    rescuer = start_celery_worker(tmp_path, name="rescuer", beat=True, **FAST_WATCHDOG)
    try:
        firing = wait_for_end(firing_id, timeout=40)
        stopped_with_no_step_left_behind(rescuer, firing_id)
    finally:
        rescuer.stop()
    assert firing.state == Firing.State.FINISHED
    stored = load_conversation(key)
    assert [m["role"] for m in stored] == ["system", "user", "assistant"]
    assert UsageRecord.objects.filter(workflow_id=workflow.pk, kind="llm").count() == 1


def test_a_worker_killed_between_a_step_and_the_next_ones_claim_is_finished_by_the_watchdog_once(owner, tmp_path):
    """The next step runs in the same worker right after the previous commit; losing that worker there loses no turn.

    An uncommitted row for `LlmStep(firing, 1)` held by the test makes the worker's claim of step 1 wait, right
    after prepare committed in the same process; the worker is killed there, before any provider call.
    """
    calls = tmp_path / "provider-calls.log"
    logged = {"OPENCOMPANY_OFFLINE_CALL_LOG": str(calls), **FAST_WATCHDOG}
    first = start_celery_worker(tmp_path, name="doomed", **logged)
    workflow, generation, ids = assistant_with(owner)
    key = conversation_key(workflow.pk, generation, ids["lead"])
    blocker = psycopg.connect(database_url_for_tests(), autocommit=False)
    try:
        firing_id = firing_start(
            workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="hello after a crash"
        )
        # Foreign keys are checked at commit, so this row takes no lock on the firing: prepare runs unhindered.
        blocker.execute(
            "insert into agents_llmstep (firing_id, iteration, state, worker, error_code, started_at, heartbeat_at) "
            "values (%s, 1, 'started', 'test-blocker', '', now(), now())",
            [str(firing_id)],
        )

        wait_until(
            lambda: waiting_on_a_lock(query_like="INSERT INTO agents_llmstep%"),
            timeout=30,
            what="the worker's claim of step 1 to wait",
        )
        assert firing_state(firing_id).state == Firing.State.RUNNING  # prepare committed in that worker
        first.kill(signal.SIGKILL)
        first.process.wait(timeout=10)
    finally:
        blocker.rollback()
        blocker.close()
        first.stop()
    assert not LlmStep.objects.filter(firing_id=firing_id).exists()
    assert not calls.exists() or calls.read_text() == ""
    rescuer = start_celery_worker(tmp_path, name="rescuer", beat=True, **logged)
    try:
        firing = wait_for_end(firing_id, timeout=40)
        stopped_with_no_step_left_behind(rescuer, firing_id)
    finally:
        rescuer.stop()
    assert firing.state == Firing.State.FINISHED, (firing.error_code, rescuer.log()[-2000:])
    assert "agent.execute_llm_step" in rescuer.log()  # sent by the watchdog, not by the lost worker
    assert calls.read_text().count("\n") == 1  # one provider call
    assert list(LlmStep.objects.filter(firing_id=firing_id).values_list("iteration", "state")) == [
        (1, LlmStep.State.PERSISTED)
    ]
    assert UsageRecord.objects.filter(workflow_id=workflow.pk, kind="llm").count() == 1
    stored = load_conversation(key)
    assert [m["role"] for m in stored] == ["system", "user", "assistant"]


def test_two_workers_on_one_conversation_lose_no_turn(owner, tmp_path):
    workers = [start_celery_worker(tmp_path, name=f"w{i}", concurrency=2) for i in range(2)]
    try:
        workflow, generation, ids = assistant_with(owner)
        prompts = [f"turn number {i}" for i in range(8)]
        firing_ids = [
            firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt=prompt)
            for prompt in prompts
        ]
        ended = [wait_for_end(firing_id, timeout=90) for firing_id in firing_ids]
    finally:
        for process in workers:
            process.stop()
    assert all(f.state == Firing.State.FINISHED for f in ended), [(f.state, f.error_code) for f in ended]
    stored = load_conversation(conversation_key(workflow.pk, generation, ids["lead"]))
    validate_messages(stored)
    users = [m["blocks"][0]["text"] for m in stored if m["role"] == "user"]
    assert sorted(users) == sorted(prompts) and len(users) == len(prompts)
    roles = [m["role"] for m in stored]
    assert roles == ["system"] + ["user", "assistant"] * len(prompts)
    # Each answer saw every turn before it: the firings were serialized, not interleaved.
    seen_counts = [
        int(m["blocks"][0]["text"].split("I see ")[1].split()[0]) for m in stored if m["role"] == "assistant"
    ]
    assert seen_counts == sorted(seen_counts) and len(set(seen_counts)) == len(prompts)
    # Each firing's steps run in the worker that received it (agent.prepare_payload), so both ran firings.
    assert all("agent.prepare_payload" in w.log() for w in workers), "both workers took part"


def test_a_worker_killed_mid_compaction_leaves_a_firing_the_watchdog_continues(owner, tmp_path):
    """A compaction between tool steps runs as its own late-acknowledged task; a worker killed in it left the firing
    waiting for its deadline (the broker hands the task back only after an hour). The rescuer's watchdog notices the
    compaction's beat went silent and continues the firing from its own list, asking for no second summary."""
    from conversations.store import COMPACTION_SUMMARY_HEADER, save_conversation
    from providers.wire import text_message

    first = start_celery_worker(tmp_path, name="doomed", OFFLINE_PROVIDER_DELAY_MS="300", **FAST_WATCHDOG)
    workflow, generation, ids = assistant_with(owner, todos=True, compaction_threshold=0.1)
    key = conversation_key(workflow.pk, generation, ids["lead"])
    bulky = "background " * 1500  # ~4,000 tokens stored: the next request crosses 10% of the offline model's window
    save_conversation(key, [text_message("user", "first: " + bulky), text_message("assistant", "Noted.")])
    firing_id = firing_start(
        workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="todo: buy milk"
    )
    wait_until(
        lambda: firing_state(firing_id).compaction_pending, timeout=30, what="the firing to wait for its compaction"
    )
    # Hold the stored conversation's header so the compaction, its summary done, blocks as it swaps the list in;
    # the worker is killed right there.
    kill_when_blocked(
        first,
        hold_sql="select 1 from conversations_agentconversation where workflow_id = %s and generation = %s "
        "and agent_node_id = %s for update",
        params=[workflow.pk, generation, ids["lead"]],
        blocked_query_like="%conversations_agentconversation%for update%",
        what="the compaction to block on the conversation's header",
    )
    assert firing_state(firing_id).compaction_pending  # nothing was swapped or continued by the killed worker

    rescuer = start_celery_worker(tmp_path, name="rescuer", beat=True, **FAST_WATCHDOG)
    try:
        firing = wait_for_end(firing_id, timeout=40)
    finally:
        rescuer.stop()
    assert firing.state == Firing.State.FINISHED, (firing.error_code, firing.error_message)
    stored = load_conversation(key)
    assert not any(COMPACTION_SUMMARY_HEADER in b.get("text", "") for m in stored for b in m["blocks"])
    assert [m["role"] for m in stored][-4:] == ["user", "assistant", "tool", "assistant"]  # the whole turn, kept
    assert LlmStep.objects.filter(firing_id=firing_id).count() == 2
    compactions = UsageRecord.objects.filter(workflow_id=workflow.pk, kind="compaction")
    assert list(compactions.values_list("outcome", flat=True)) == ["ambiguous"]  # its summary call may have run


def test_a_worker_killed_mid_answer_leaves_the_chat_what_the_owner_saw(owner, tmp_path):
    """Issue 34: the run ended `interrupted` with an empty reply although the owner had watched the answer arrive.
    The reply keeps the streamed text, marked as cut short; the stored conversation keeps the one-attempt rule (the
    step is `ambiguous`, nothing of the unsaid answer is stored or replayed, no second call)."""
    from chat.models import ChatRun
    from chat.services.runs import chat_message_send
    from tests.chat.helpers import chat_workflow
    from tests.realtime import SocketClient

    calls = tmp_path / "provider-calls.log"
    slow = {"OFFLINE_PROVIDER_DELAY_MS": "300", "OPENCOMPANY_OFFLINE_CALL_LOG": str(calls), **FAST_WATCHDOG}
    workflow, generation, ids = chat_workflow(owner)
    page = SocketClient(f"/ws/workflows/{workflow.pk}/", user=owner)
    assert page.connect() and page.receive()["type"] == "hello"
    first = start_celery_worker(tmp_path, name="doomed", **slow)
    try:
        prompt = " ".join(f"word{i}" for i in range(60))
        _message, run, _ = chat_message_send(workflow=workflow, text=f"Please repeat this back to me: {prompt}")
        seen, deltas = "", 0
        while deltas < 3:  # the owner watches a few pieces of the answer arrive
            event = page.receive(timeout=30)
            if event["type"] == "run.delta":
                seen, deltas = seen + event["text"], deltas + 1
        first.kill(signal.SIGKILL)
        first.process.wait(timeout=10)
    finally:
        first.stop()
    rescuer = start_celery_worker(tmp_path, name="rescuer", beat=True, **slow)
    try:
        run = wait_until(
            lambda: not (r := ChatRun.objects.get(pk=run.pk)).is_active and r, timeout=60, what="the run to end"
        )
    finally:
        rescuer.stop()
        page.close()

    assert run.state == ChatRun.State.ERROR and run.error_code == "interrupted"
    reply = run.reply_message
    assert reply.status == "error" and reply.meta == {"error_code": "interrupted", "partial": True}
    assert seen.strip() and reply.text.startswith(seen)  # what the owner saw (and any piece on its way then)
    assert "word59" not in reply.text  # cut short where the worker died, not a later answer
    assert calls.read_text().count("\n") == 1  # one attempt: never called again
    step = LlmStep.objects.get(firing_id=run.firing_id)
    assert step.state == LlmStep.State.AMBIGUOUS
    stored = load_conversation(conversation_key(workflow.pk, generation, ids["lead"]))
    assert not any(m["role"] == "assistant" for m in stored)  # nothing unsaid is replayed to the model
