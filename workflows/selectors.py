import json
import threading
from collections import OrderedDict
from dataclasses import dataclass

from django.db.models import F, OuterRef, Subquery, TextField
from django.db.models.functions import Cast

from core.errors import NotFoundError

from .graph import normalize_workflow_graph
from .models import Workflow, WorkflowGeneration


def access_workflow(*, user, workflow_id) -> Workflow:
    """The workflow if `user` owns it. Another owner's id answers exactly like a missing one."""
    try:
        workflow_pk = int(workflow_id)
    except (TypeError, ValueError):
        raise NotFoundError(message="Workflow not found.") from None
    if user is None or not user.is_authenticated:
        raise NotFoundError(message="Workflow not found.")
    workflow = Workflow.objects.filter(pk=workflow_pk, owner_id=user.pk).first()
    if workflow is None:
        raise NotFoundError(message="Workflow not found.")
    return workflow


def workflows_for_owner(*, user):
    return Workflow.objects.filter(owner_id=user.pk).order_by("-updated_at", "-id")


def workflow_generations(*, workflow: Workflow):
    return WorkflowGeneration.objects.filter(workflow=workflow).order_by("-number")


# A generation's snapshot is written once when it is admitted and never changed (workflow ids are never reused), so
# a process keeps the last few it read as JSON text: every firing starts by reading its generation's graph.
_SNAPSHOTS: OrderedDict[tuple[int, int], str] = OrderedDict()
_SNAPSHOTS_KEPT = 256
_snapshots_lock = threading.Lock()


def _generation_snapshot(workflow_id: int, number: int) -> dict | None:
    key = (workflow_id, number)
    with _snapshots_lock:
        text = _SNAPSHOTS.get(key)
        if text is not None:
            _SNAPSHOTS.move_to_end(key)
    if text is None:
        # Serialized through the same JSON the column holds; a fresh parse per call keeps callers' dicts their own.
        text = (
            WorkflowGeneration.objects.filter(workflow_id=workflow_id, number=number)
            .annotate(text=Cast("graph", TextField()))
            .values_list("text", flat=True)
            .first()
        )
        if text is None:
            return None
        with _snapshots_lock:
            _SNAPSHOTS[key] = text
            while len(_SNAPSHOTS) > _SNAPSHOTS_KEPT:
                _SNAPSHOTS.popitem(last=False)
    return json.loads(text)


def generation_graph(workflow: Workflow, generation: int | None = None, *, normalize: bool = True) -> dict:
    """The normalized graph an agent firing of `generation` runs on.

    Generation 0 (a manual test run) runs the current draft; any other number runs its admitted snapshot;
    None means the live generation. Raises NotFoundError for a generation the workflow never had. Drafts and
    snapshots are stored normalized, so `normalize=False` (the runtime, once per firing) skips doing it again."""
    number = workflow.live_generation if generation is None else int(generation)
    if number == 0:
        source = workflow.graph
    else:
        source = _generation_snapshot(workflow.pk, number)
        if source is None:
            raise NotFoundError(message="Generation not found.", extra={"generation": number})
    source = source if isinstance(source, dict) else {}
    return normalize_workflow_graph(source, workflow_id=workflow.pk).graph if normalize else source


EXPORT_FORMAT = "opencompany.workflow"
EXPORT_FORMAT_VERSION = 1
# Defence in depth: params are schema-checked and hold none of these, but an export must never carry one.
_REDACTED_KEYS = frozenset(
    {
        "api_key",
        "apikey",
        "secret",
        "token",
        "password",
        "credentials",
        "authorization",
        "provider_state",
        "signature",
        "thought_signature",
        "encrypted_content",
        "transcript",
        "transcripts",
        "messages",
        "memory",
        "history",
    }
)


def _redact(value):
    if isinstance(value, dict):
        return {k: _redact(v) for k, v in value.items() if str(k).lower() not in _REDACTED_KEYS}
    if isinstance(value, list):
        return [_redact(v) for v in value]
    return value


def workflow_export(*, workflow: Workflow) -> dict:
    """The portable document: name and normalized graph only. No conversations, memory items, todos, legacy
    transcripts, generations or secrets — those live in other tables and are never read here."""
    graph = normalize_workflow_graph(
        workflow.graph if isinstance(workflow.graph, dict) else {}, workflow_id=workflow.pk
    )
    nodes = [{**node, "params": _redact(node.get("params"))} for node in graph.graph["nodes"]]
    return {
        "format": EXPORT_FORMAT,
        "format_version": EXPORT_FORMAT_VERSION,
        "graph_version": graph.graph_version,
        "name": workflow.name,
        "graph": {"nodes": nodes, "edges": graph.graph["edges"]},
    }


_activity_sources: list = []


def register_activity_source(source) -> None:
    """`source(workflow_ids=[...]) -> {workflow_id: datetime}`: when something a higher app owns last happened in
    each workflow (agents registers its firings in `AgentsConfig.ready()`), for the list's "last activity"."""
    if source not in _activity_sources:
        _activity_sources.append(source)


def workflows_overview(*, user) -> list[dict]:
    """The workflows list page: each workflow's state (running generation, stopped, never started) and its last
    activity (the latest of an edit and what the registered activity sources report, e.g. an agent firing). One
    query, plus one per source, whatever the number of workflows."""
    live_numbers = WorkflowGeneration.objects.filter(
        workflow=OuterRef("pk"), state=WorkflowGeneration.State.LIVE
    ).values("number")[:1]
    workflows = list(workflows_for_owner(user=user).annotate(running=Subquery(live_numbers)))
    ids = [w.pk for w in workflows]
    reported = [source(workflow_ids=ids) for source in _activity_sources]
    rows = []
    for workflow in workflows:
        graph = workflow.graph if isinstance(workflow.graph, dict) else {}
        if workflow.running is not None:
            state, state_label = "live", f"Running · generation {workflow.running}"
        elif workflow.live_generation:
            state, state_label = "stopped", f"Stopped · last generation {workflow.live_generation}"
        else:
            state, state_label = "draft", "Never started"
        last = max(filter(None, [workflow.updated_at, *(times.get(workflow.pk) for times in reported)]))
        rows.append(
            {
                "workflow": workflow,
                "state": state,
                "state_label": state_label,
                "running_generation": workflow.running,
                "node_count": len(graph.get("nodes", []) or []),
                "last_activity": last,
            }
        )
    return rows


@dataclass(frozen=True)
class LiveGeneration:
    number: int
    live: bool  # False: the workflow was stopped (the generation it names has ended)
    graph: dict


def live_generation_snapshot(*, workflow_id: int) -> LiveGeneration | None:
    """The generation the workflow row names live right now, read in one query (not from a possibly stale
    `workflow` object); None for a workflow never started."""
    row = (
        WorkflowGeneration.objects.filter(workflow_id=workflow_id, number=F("workflow__live_generation"))
        .values_list("number", "state", "graph")
        .first()
    )
    if row is None:
        return None
    number, state, graph = row
    return LiveGeneration(number=number, live=state == WorkflowGeneration.State.LIVE, graph=graph or {})


def workflow_never_started(*, workflow_id: int) -> bool:
    return Workflow.objects.filter(pk=workflow_id, live_generation=0).exists()


def live_graph(*, workflow: Workflow) -> dict:
    """The graph snapshot of the generation `workflow` names live (empty when the workflow was never started)."""
    if not workflow.live_generation:
        return {}
    graph = (
        WorkflowGeneration.objects.filter(workflow=workflow, number=workflow.live_generation)
        .values_list("graph", flat=True)
        .first()
    )
    return graph if isinstance(graph, dict) else {}


def generation_with_workflow(*, workflow_id: int, number: int) -> WorkflowGeneration | None:
    """Generation `number` of the workflow, its workflow row read in the same query; None when it has none."""
    return WorkflowGeneration.objects.select_related("workflow").filter(workflow_id=workflow_id, number=number).first()


def generation_is_live(*, workflow_id: int, number: int) -> bool:
    """Whether generation `number` is still live (an ended generation's conversations are never continued)."""
    return WorkflowGeneration.objects.filter(
        workflow_id=workflow_id, number=number, state=WorkflowGeneration.State.LIVE
    ).exists()


def workflow_live_generation(*, workflow_id: int) -> int:
    """The generation number the workflow row names live right now (0: never started), read from the row."""
    return Workflow.objects.filter(pk=workflow_id).values_list("live_generation", flat=True).first() or 0
