"""Celery entry points of a firing: ids in, one service call, nothing waited on.

`agent.execute_llm_step` is acknowledged early and never retried: a worker lost mid-call
must not lead to a second (billed) provider call; the watchdog records it as ambiguous.
`agent.persist_turn` is acknowledged late and retried on database errors: it is idempotent.
`agent.prepare_payload` is acknowledged early and retried on database errors; a firing whose
prepare was lost with its worker is still `queued`, and the watchdog sends it again.

The early-acknowledged tasks then run, in this process, the steps their firing continues to
(`dispatch.running_steps`): one broker hop per firing instead of one per step. What keeps a
step at most once is in the database, not in the message: the `LlmStep(firing, n)` claim before
a provider call, the step's state for persist, the firing's state for prepare. A late-acknowledged
task does not continue in-process: its message would stay unacknowledged through the next
provider call, and the Redis transport cannot put back an unacknowledged message when the
broker connection drops (the worker dies restoring it), so it sends the next step instead.
"""

from celery import shared_task
from django.db import DatabaseError

from agents.dispatch import running_steps
from agents.services import compaction, execute, persist, prepare, retention, watchdog


@shared_task(
    name="agent.prepare_payload",
    ignore_result=True,
    acks_late=False,
    autoretry_for=(DatabaseError,),
    retry_backoff=True,
    max_retries=5,
)
def prepare_payload(firing_id: str) -> None:
    with running_steps():
        prepare.prepare_payload(firing_id)


@shared_task(name="agent.execute_llm_step", ignore_result=True, acks_late=False, max_retries=0)
def execute_llm_step(firing_id: str, iteration: int) -> None:
    with running_steps():
        execute.execute_llm_step(firing_id, iteration)


@shared_task(
    name="agent.persist_turn",
    ignore_result=True,
    acks_late=True,
    autoretry_for=(DatabaseError,),
    retry_backoff=True,
    max_retries=8,
)
def persist_turn(firing_id: str, iteration: int) -> None:
    persist.persist_turn(firing_id, iteration)


@shared_task(name="agent.compact_context", ignore_result=True, acks_late=True, max_retries=0)
def compact_context(
    workflow_id: int, generation: int, agent_node_id: str, firing_id: str | None = None, next_iteration: int = 0
) -> None:
    compaction.compact_context(workflow_id, generation, agent_node_id, firing_id, next_iteration)


@shared_task(name="agents.watchdog", ignore_result=True)
def watchdog_sweep() -> None:
    watchdog.watchdog_sweep()


@shared_task(name="agents.prune_firings", ignore_result=True)
def prune_firings() -> None:
    retention.firings_prune()
