"""Writes to workflows: create, save, import, delete, start, stop, reset, add a teammate, clear context/memory.

Every graph that enters storage goes through `normalize_workflow_graph` and `validate_workflow_graph`. Lock
order: the workflow row first (select_for_update), then anything keyed by it. Reset and clear name no node type
and no other app: they go through NodeSpec hooks and the listener registries (workflows/listeners.py).
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field

import psycopg
from django.conf import settings
from django.db import OperationalError, transaction
from django.db.models import Max
from django.utils import timezone

from opencompany.errors import ConflictError, ServiceError
from opencompany.realtime import publish_workflow_event

from .demo import DEMO_WORKFLOW_NAME, demo_graph
from .events import workflow_generation_event, workflow_reset_event, workflow_updated_event
from .graph import (
    CONTEXT_TOPOLOGY_CODES,
    GraphShapeError,
    NormalizationResult,
    agent_for_context,
    agent_nodes,
    errors_of,
    graph_size_issues,
    highest_numbers,
    normalize_workflow_graph,
    validate_workflow_graph,
    warnings_of,
)
from .graph.shape import graph_nul_path, graph_shape_errors
from .listeners import reset_listeners
from .locks import workflow_for_update
from .models import ArchiveOutbox, LegacyImportRecord, Workflow, WorkflowGeneration
from .nodes import IS_AGENT, IS_CONTEXT_PANEL, KIND_CONTEXT, KIND_TOOL, ResetContext, get_node_spec, specs_with
from .outbox import archive_outbox_write
from .selectors import workflow_export
from .starters import starter

logger = logging.getLogger(__name__)

EMPTY_GRAPH = {"nodes": [], "edges": []}


@dataclass
class GraphOutcome:
    """A stored workflow plus what normalization said about the graph it was given."""

    workflow: Workflow
    aliases: dict = field(default_factory=dict)
    warnings: list = field(default_factory=list)  # list of issue dicts
    legacy_imports: list = field(default_factory=list)  # list of dicts (no transcript text)
    extra: dict = field(default_factory=dict)


@dataclass
class ResetOutcome:
    workflow: Workflow
    generation: WorkflowGeneration
    previous_generation: int
    report: dict
    replayed: bool = False


# --- graph preparation --------------------------------------------------------------------------------------


def _check_name(name) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ServiceError("invalid_name", "A workflow needs a non-empty name.")
    name = name.strip()
    if len(name) > settings.WORKFLOW_NAME_MAX_CHARS:
        raise ServiceError("invalid_name", f"The name is at most {settings.WORKFLOW_NAME_MAX_CHARS} characters.")
    return name


def used_numbers(workflow: Workflow) -> dict[str, int]:
    """What `normalize_workflow_graph(used_numbers=...)` must not hand out again for this workflow."""
    merged = dict(workflow.node_numbers or {}) if isinstance(workflow.node_numbers, dict) else {}
    stored = workflow.graph if isinstance(workflow.graph, dict) else EMPTY_GRAPH
    for node_type, number in highest_numbers(stored, workflow_id=workflow.pk).items():
        merged[node_type] = max(int(merged.get(node_type, 0) or 0), number)
    return merged


def _remember_numbers(workflow: Workflow, graph: dict) -> None:
    merged = used_numbers(workflow)
    for node_type, number in highest_numbers(graph, workflow_id=workflow.pk).items():
        merged[node_type] = max(merged.get(node_type, 0), number)
    workflow.node_numbers = merged


def prepare_graph(*, graph, workflow_id: int, used: dict | None = None) -> tuple[NormalizationResult, list]:
    """Shape-check, size-check, normalize and validate a graph from outside; raise with the issues when it has
    errors. A wrongly shaped graph is refused whole: normalizing it would drop what it cannot read."""
    shape_errors = graph_shape_errors(graph)
    if shape_errors:
        raise ServiceError(
            "invalid_request",
            "The graph is not shaped like a workflow graph.",
            extra={"errors": {"graph": shape_errors}},
        )
    nul_path = graph_nul_path(graph)
    if nul_path:
        raise ServiceError("invalid_graph", f"{nul_path} holds a NUL character, which cannot be stored.")
    size_issues = graph_size_issues(graph)
    if size_issues:
        raise ServiceError(
            "graph_too_large", size_issues[0].message, extra={"issues": [i.as_dict() for i in size_issues]}
        )
    try:
        result = normalize_workflow_graph(graph, workflow_id=workflow_id, used_numbers=used)
    except GraphShapeError as exc:
        raise ServiceError("invalid_graph", str(exc)) from None
    issues = validate_workflow_graph(result.graph)
    errors = errors_of(issues)
    if errors:
        topology = any(issue.code in CONTEXT_TOPOLOGY_CODES for issue in errors)
        raise ServiceError(
            "invalid_context_topology" if topology else "invalid_graph",
            "The graph has errors: " + "; ".join(f"{e.code} ({e.node_id or e.edge_id or 'graph'})" for e in errors[:5]),
            extra={
                "issues": [i.as_dict() for i in result.warnings + issues],
                "aliases": result.aliases,
            },
        )
    return result, result.warnings + warnings_of(issues)


def _persist_legacy_imports(workflow: Workflow, result: NormalizationResult) -> list[dict]:
    # Committed in the same transaction that retires the legacy topology, so a transcript is never lost.
    records = []
    for item in result.legacy_imports:
        digest = hashlib.sha256(item.transcript.encode()).hexdigest()
        LegacyImportRecord.objects.get_or_create(
            workflow=workflow,
            agent_node_id=item.agent_node_id,
            digest=digest,
            defaults={
                "kind": item.kind,
                "context_node_id": item.context_node_id,
                "memory_node_id": item.memory_node_id,
                "transcript": item.transcript,
            },
        )
        records.append(item.as_dict())
    return records


def _outcome(workflow, result, warnings, legacy) -> GraphOutcome:
    return GraphOutcome(
        workflow=workflow,
        aliases=dict(result.aliases),
        warnings=[w.as_dict() for w in warnings],
        legacy_imports=legacy,
    )


def _lock(workflow: Workflow) -> Workflow:
    # Every writer of a workflow takes its row lock first; saves, starts and resets serialize here.
    return workflow_for_update(workflow.pk)


def _context_ids(graph: dict) -> set[str]:
    ids = set()
    for node in graph.get("nodes", []):
        spec = get_node_spec(node.get("type"))
        if spec is not None and spec.has(IS_CONTEXT_PANEL):
            ids.add(node["id"])
    return ids


def _publish_updated(workflow: Workflow) -> None:
    publish_workflow_event(
        workflow_id=workflow.pk,
        event=workflow_updated_event(workflow_id=workflow.pk, revision=workflow.revision),
    )


# --- create / save / load / import / delete -------------------------------------------------------------------


@transaction.atomic
def workflow_create(*, owner, name: str, graph: dict | None = None) -> GraphOutcome:
    name = _check_name(name)
    graph = EMPTY_GRAPH if graph is None else graph
    size_issues = graph_size_issues(graph)
    if size_issues:
        raise ServiceError("graph_too_large", size_issues[0].message)
    # Canonical ids embed the workflow id, so the row exists before its graph is normalized.
    workflow = Workflow.objects.create(owner=owner, name=name, graph=EMPTY_GRAPH)
    result, warnings = prepare_graph(graph=graph, workflow_id=workflow.pk)
    legacy = _persist_legacy_imports(workflow, result)
    _remember_numbers(workflow, result.graph)
    workflow.graph = result.graph
    workflow.graph_version = result.graph_version
    workflow.save(update_fields=["graph", "graph_version", "node_numbers", "updated_at"])
    return _outcome(workflow, result, warnings, legacy)


def _save_locked(locked: Workflow, *, graph: dict, name: str | None) -> GraphOutcome:
    result, warnings = prepare_graph(graph=graph, workflow_id=locked.pk, used=used_numbers(locked))
    legacy = _persist_legacy_imports(locked, result)
    old_graph = locked.graph if isinstance(locked.graph, dict) else EMPTY_GRAPH
    # Save never restores a deleted Context; removing one archives the conversations it kept.
    removed = _context_ids(old_graph) - _context_ids(result.graph)
    if removed:
        served = [agent for context in removed if (agent := agent_for_context(old_graph, context))]
        archive_outbox_write(
            workflow_id=locked.pk,
            reason=ArchiveOutbox.Reason.CONTEXT_REMOVED,
            context_node_ids=removed,
            agent_node_ids=served,
        )
    _remember_numbers(locked, result.graph)
    locked.graph = result.graph
    locked.graph_version = result.graph_version
    locked.revision += 1
    fields = ["graph", "graph_version", "revision", "node_numbers", "updated_at"]
    if name is not None:
        locked.name = _check_name(name)
        fields.append("name")
    locked.save(update_fields=fields)
    _publish_updated(locked)
    outcome = _outcome(locked, result, warnings, legacy)
    outcome.extra["archived_context_node_ids"] = sorted(removed)
    return outcome


@transaction.atomic
def workflow_save(*, workflow: Workflow, graph: dict, revision: int, name: str | None = None) -> GraphOutcome:
    """Optimistic save: `revision` is the one the client started from; a stale one is a 409 with the current."""
    locked = _lock(workflow)
    if revision != locked.revision:
        raise ConflictError(
            "revision_conflict",
            "The workflow changed since you loaded it; reload and apply your change again.",
            extra={"current_revision": locked.revision},
        )
    return _save_locked(locked, graph=graph, name=name)


def workflow_load(*, workflow: Workflow) -> GraphOutcome:
    """The stored graph through the pipeline. A stored graph that normalizes differently (a legacy row) is
    upgraded once, under the lock, with its legacy import records, so every reader sees the same ids."""
    result = normalize_workflow_graph(
        workflow.graph if isinstance(workflow.graph, dict) else EMPTY_GRAPH,
        workflow_id=workflow.pk,
        used_numbers=used_numbers(workflow),
    )
    issues = validate_workflow_graph(result.graph)
    if result.graph == workflow.graph and not result.legacy_imports:
        return _outcome(workflow, result, result.warnings + issues, [])
    with transaction.atomic():
        locked = _lock(workflow)
        result = normalize_workflow_graph(
            locked.graph if isinstance(locked.graph, dict) else EMPTY_GRAPH,
            workflow_id=locked.pk,
            used_numbers=used_numbers(locked),
        )
        legacy = _persist_legacy_imports(locked, result)
        if result.graph != locked.graph:
            _remember_numbers(locked, result.graph)
            locked.graph = result.graph
            locked.graph_version = result.graph_version
            locked.revision += 1
            locked.save(update_fields=["graph", "graph_version", "revision", "node_numbers", "updated_at"])
            _publish_updated(locked)
    issues = validate_workflow_graph(result.graph)
    return _outcome(locked, result, result.warnings + issues, legacy)


def workflow_import(*, owner, document: dict, name: str | None = None) -> GraphOutcome:
    """A new workflow from an export document (or any `{name?, graph}`); ids are re-canonicalized for it."""
    if not isinstance(document, dict) or not isinstance(document.get("graph"), dict):
        raise ServiceError("invalid_import", "An import is a JSON object with a `graph` object.")
    return workflow_create(
        owner=owner, name=name or document.get("name") or "Imported workflow", graph=document["graph"]
    )


@transaction.atomic
def workflow_delete(*, workflow: Workflow) -> None:
    locked = _lock(workflow)
    graph = locked.graph if isinstance(locked.graph, dict) else EMPTY_GRAPH
    archive_outbox_write(
        workflow_id=locked.pk,
        reason=ArchiveOutbox.Reason.WORKFLOW_DELETED,
        context_node_ids=_context_ids(graph),
        agent_node_ids=[node["id"] for node in agent_nodes(graph)],
    )
    locked.delete()


# --- generations --------------------------------------------------------------------------------------------


def _next_generation_number(workflow: Workflow) -> int:
    top = WorkflowGeneration.objects.filter(workflow=workflow).aggregate(top=Max("number"))["top"] or 0
    return max(top, workflow.live_generation) + 1


def _publish_generation(workflow: Workflow, generation: WorkflowGeneration) -> None:
    publish_workflow_event(
        workflow_id=workflow.pk,
        event=workflow_generation_event(workflow_id=workflow.pk, generation=generation.number, state=generation.state),
    )


def live_generation_of(workflow: Workflow) -> WorkflowGeneration | None:
    return WorkflowGeneration.objects.filter(workflow=workflow, state=WorkflowGeneration.State.LIVE).first()


@transaction.atomic
def workflow_start(*, workflow: Workflow) -> tuple[WorkflowGeneration, bool]:
    """Deploy: admit generation n+1 with a snapshot of the normalized graph. Starting again with an unchanged
    graph returns the running generation (a double click does not wipe the conversations)."""
    locked = _lock(workflow)
    result, _warnings = prepare_graph(graph=locked.graph, workflow_id=locked.pk)
    live = live_generation_of(locked)
    if live is not None and live.graph_revision == locked.revision:
        return live, False
    now = timezone.now()
    if live is not None:
        live.state = WorkflowGeneration.State.SUPERSEDED
        live.ended_at = now
        live.save(update_fields=["state", "ended_at"])
        _generation_ended(locked, live)
    generation = WorkflowGeneration.objects.create(
        workflow=locked,
        number=_next_generation_number(locked),
        state=WorkflowGeneration.State.LIVE,
        graph=result.graph,
        admitted_by=WorkflowGeneration.AdmittedBy.START,
        graph_revision=locked.revision,
    )
    locked.live_generation = generation.number
    locked.save(update_fields=["live_generation", "updated_at"])
    _publish_generation(locked, generation)
    return generation, True


@transaction.atomic
def workflow_stop(*, workflow: Workflow) -> WorkflowGeneration | None:
    """End the live generation. Idempotent: stopping a stopped workflow returns its latest generation."""
    locked = _lock(workflow)
    live = live_generation_of(locked)
    if live is None:
        return WorkflowGeneration.objects.filter(workflow=locked).order_by("-number").first()
    live.state = WorkflowGeneration.State.STOPPED
    live.ended_at = timezone.now()
    live.save(update_fields=["state", "ended_at"])
    _generation_ended(locked, live)
    _publish_generation(locked, live)
    return live


def _generation_ended(workflow: Workflow, generation: WorkflowGeneration) -> None:
    from .listeners import generation_end_listeners

    for listener in generation_end_listeners().values():
        listener(workflow=workflow, generation=generation)


def _reset_nodes(workflow: Workflow, live: WorkflowGeneration | None) -> list[dict]:
    # The nodes of the draft and of the running snapshot: a node removed since Start still had state.
    nodes: dict[str, dict] = {}
    for graph in (live.graph if live else None, workflow.graph):
        if not isinstance(graph, dict):
            continue
        normalized = normalize_workflow_graph(graph, workflow_id=workflow.pk).graph
        for node in normalized["nodes"]:
            nodes.setdefault(node["id"], node)
    return list(nodes.values())


def workflow_reset(*, workflow: Workflow, actor=None, expected_generation: int | None = None) -> ResetOutcome:
    """Workflow Reset (docs/workflows.md#reset): reset listeners end live runs and clear conversations and the chat
    thread, every node's `reset_execution_state` hook applies its policy (memory `reset_policy`, todos), and a fresh
    generation is admitted. With `expected_generation`, a retried reset of that generation replays its result.

    The reset locks chat runs before firings, the reverse of a concurrent prepare, so PostgreSQL may abort it with
    a deadlock (docs/architecture.md#reset-deadlock). Each attempt runs in its own savepoint, so a deadlocked
    one leaves nothing behind and the next starts afresh (the repeated reset is idempotent); when every attempt
    deadlocks the caller gets 409 `reset_busy`, which says to try again."""
    for attempt in range(settings.WORKFLOW_RESET_DEADLOCK_RETRIES + 1):
        try:
            with transaction.atomic():
                return _reset_attempt(workflow=workflow, actor=actor, expected_generation=expected_generation)
        except OperationalError as exc:
            if not _is_deadlock(exc):
                raise
            logger.warning("workflow reset deadlocked", extra={"workflow_id": workflow.pk, "attempt": attempt + 1})
    raise ConflictError(
        "reset_busy",
        "The workflow was busy starting a step; nothing was reset. Try the reset again.",
        extra={"retry": True},
        headers={"Retry-After": "1"},
    )


def _is_deadlock(exc: BaseException) -> bool:
    seen = 0
    while exc is not None and seen < 5:  # Django wraps psycopg's error
        if isinstance(exc, psycopg.errors.DeadlockDetected):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def _reset_attempt(*, workflow: Workflow, actor, expected_generation: int | None) -> ResetOutcome:
    locked = _lock(workflow)
    previous = locked.live_generation
    if expected_generation is not None and expected_generation != previous:
        latest = WorkflowGeneration.objects.filter(workflow=locked, number=previous).first()
        if (
            latest is not None
            and latest.admitted_by == WorkflowGeneration.AdmittedBy.RESET
            and latest.reset_from == expected_generation
        ):
            return ResetOutcome(locked, latest, expected_generation, {"replayed": True}, replayed=True)
        raise ConflictError(
            "generation_conflict",
            "The workflow is no longer at that generation.",
            extra={"current_generation": previous},
        )
    live = live_generation_of(locked)
    new_number = _next_generation_number(locked)
    policy_context = ResetContext(actor=actor, previous_generation=previous, new_generation=new_number)
    report: dict = {"listeners": {}, "nodes": {}}
    for name, listener in reset_listeners().items():
        report["listeners"][name] = listener(
            workflow=locked, previous_generation=previous, new_generation=new_number, actor=actor
        )
    for node in _reset_nodes(locked, live):
        spec = get_node_spec(node.get("type"))
        if spec is not None and spec.reset_execution_state is not None:
            report["nodes"][node["id"]] = spec.reset_execution_state(locked, node, policy_context=policy_context)
    now = timezone.now()
    if live is not None:
        live.state = WorkflowGeneration.State.RESET
        live.ended_at = now
        live.save(update_fields=["state", "ended_at"])
    snapshot = normalize_workflow_graph(
        locked.graph if isinstance(locked.graph, dict) else EMPTY_GRAPH, workflow_id=locked.pk
    ).graph
    generation = WorkflowGeneration.objects.create(
        workflow=locked,
        number=new_number,
        state=WorkflowGeneration.State.LIVE,
        graph=snapshot,
        admitted_by=WorkflowGeneration.AdmittedBy.RESET,
        graph_revision=locked.revision,
        reset_from=previous,
    )
    locked.live_generation = new_number
    locked.save(update_fields=["live_generation", "updated_at"])
    publish_workflow_event(
        workflow_id=locked.pk,
        event=workflow_reset_event(workflow_id=locked.pk, generation=new_number, previous=previous),
    )
    return ResetOutcome(locked, generation, previous, report)


# --- subagents ----------------------------------------------------------------------------------------------

_NEW_AGENT_ID = "__new_subagent__"
_NEW_CONTEXT_ID = "__new_subagent_context__"


def _handle(handles, kind: str) -> str | None:
    return next((h.id for h in handles if h.kind == kind), None)


@transaction.atomic
def workflow_add_subagent(
    *, workflow: Workflow, lead_node_id: str, spec: dict, revision: int | None = None, position: dict | None = None
) -> GraphOutcome:
    """Add a teammate agent wired as the lead's tool, with a fresh Context of its own (the lead's is untouched).

    `spec` is the teammate's agent params. The outcome's extra holds `subagent_node_id` and `context_node_id`."""
    locked = _lock(workflow)
    if revision is not None and revision != locked.revision:
        raise ConflictError(
            "revision_conflict",
            "The workflow changed since you loaded it; reload and try again.",
            extra={"current_revision": locked.revision},
        )
    graph = normalize_workflow_graph(locked.graph, workflow_id=locked.pk).graph
    lead = next((n for n in graph["nodes"] if n["id"] == lead_node_id), None)
    lead_spec = get_node_spec(lead.get("type")) if lead else None
    if lead is None or lead_spec is None or not lead_spec.has(IS_AGENT):
        raise ServiceError(
            "unknown_node", "The lead must be an agent node of this workflow.", extra={"node_id": lead_node_id}
        )
    context_spec = next((s for s in specs_with(IS_CONTEXT_PANEL) if _handle(s.outputs, KIND_CONTEXT)), None)
    if not isinstance(spec, dict):
        raise ServiceError("invalid_params", "The teammate's params must be an object.")
    if context_spec is None:
        raise ServiceError("no_context_type", "No Context node type is registered.", status=500)
    lead_position = lead.get("position") or {"x": 0, "y": 0}
    teammate_position = position or {"x": lead_position["x"] + 320, "y": lead_position["y"] + 200}
    graph["nodes"].append({"id": _NEW_AGENT_ID, "type": lead["type"], "params": spec, "position": teammate_position})
    graph["nodes"].append(
        {
            "id": _NEW_CONTEXT_ID,
            "type": context_spec.type,
            "params": {},
            "position": {"x": teammate_position["x"], "y": teammate_position["y"] + 160},
        }
    )
    graph["edges"].append(
        {
            "source": _NEW_AGENT_ID,
            "sourceHandle": _handle(lead_spec.outputs, KIND_TOOL),
            "target": lead_node_id,
            "targetHandle": _handle(lead_spec.inputs, KIND_TOOL),
        }
    )
    graph["edges"].append(
        {
            "source": _NEW_CONTEXT_ID,
            "sourceHandle": _handle(context_spec.outputs, KIND_CONTEXT),
            "target": _NEW_AGENT_ID,
            "targetHandle": _handle(lead_spec.inputs, KIND_CONTEXT),
        }
    )
    outcome = _save_locked(locked, graph=graph, name=None)
    outcome.extra["subagent_node_id"] = outcome.aliases.pop(_NEW_AGENT_ID)
    outcome.extra["context_node_id"] = outcome.aliases.pop(_NEW_CONTEXT_ID)
    return outcome


# --- clear context / clear memory (admin, panels) --------------------------------------------------------------


@transaction.atomic
def workflow_context_clear(*, workflow: Workflow, agent_node_id: str | None = None) -> ArchiveOutbox:
    """Clear stored conversations through the archive listeners (all agents, or one). Memory is untouched.

    Returns the outbox row; it is drained on commit, or call `workflows.outbox.archive_outbox_process` to run it
    now (the admin does, so the page shows the result)."""
    locked = _lock(workflow)
    graph = normalize_workflow_graph(locked.graph, workflow_id=locked.pk).graph
    agents = [agent_node_id] if agent_node_id else [node["id"] for node in agent_nodes(graph)]
    contexts = [c for c in _context_ids(graph) if agent_node_id is None or agent_for_context(graph, c) == agent_node_id]
    return archive_outbox_write(
        workflow_id=locked.pk,
        reason=ArchiveOutbox.Reason.CONTEXT_CLEARED,
        context_node_ids=contexts,
        agent_node_ids=agents,
    )


@transaction.atomic
def workflow_memory_clear(*, workflow: Workflow, actor=None, node_id: str | None = None) -> dict[str, int]:
    """Clear Memory: removes items only, through each memory-holding node's `clear_memory` hook."""
    locked = _lock(workflow)
    graph = normalize_workflow_graph(locked.graph, workflow_id=locked.pk).graph
    cleared = {}
    for node in graph["nodes"]:
        if node_id is not None and node["id"] != node_id:
            continue
        spec = get_node_spec(node.get("type"))
        if spec is not None and spec.clear_memory is not None:
            cleared[node["id"]] = spec.clear_memory(locked, node, actor=actor)
    if node_id is not None and not cleared:
        raise ServiceError("unknown_node", "That node holds no memory.", extra={"node_id": node_id})
    return cleared


# --- owner actions from the pages: rename, duplicate, test run --------------------------------------------------


@transaction.atomic
def workflow_rename(*, workflow: Workflow, name: str) -> Workflow:
    """Rename without touching the graph: the revision is for graph edits, so an open editor's save still applies."""
    name = _check_name(name)
    locked = _lock(workflow)
    locked.name = name
    locked.save(update_fields=["name", "updated_at"])
    _publish_updated(locked)
    return locked


def workflow_duplicate(*, workflow: Workflow, name: str | None = None) -> GraphOutcome:
    """A new workflow of the same owner with a copy of the graph (fresh canonical ids). Nothing that ran is
    copied: no generations, conversations, memory items or todos — the copy is a draft that was never started."""
    document = workflow_export(workflow=workflow)
    limit = settings.WORKFLOW_NAME_MAX_CHARS
    copy_name = name or f"{workflow.name} (copy)"
    if len(copy_name) > limit:
        copy_name = copy_name[: limit - 7].rstrip() + " (copy)"
    return workflow_import(owner=workflow.owner, document=document, name=copy_name)


def workflow_create_from_starter(*, owner, starter_key: str, name: str | None = None) -> GraphOutcome:
    """New workflow from the list's choices (workflows/starters.py): a blank canvas or a template."""
    chosen = starter(starter_key)
    if chosen is None:
        raise ServiceError("unknown_template", "There is no such template.", extra={"template": starter_key})
    graph = chosen.graph() or EMPTY_GRAPH
    return workflow_create(owner=owner, name=(name or "").strip() or chosen.default_name, graph=graph)


@transaction.atomic
def workflow_demo_ensure(*, owner) -> tuple[Workflow, bool]:
    """The owner's demo workflow (`workflows/demo.py`), created once: (workflow, created)."""
    existing = Workflow.objects.filter(owner=owner, name=DEMO_WORKFLOW_NAME).first()
    if existing:
        return existing, False
    return workflow_create(owner=owner, name=DEMO_WORKFLOW_NAME, graph=demo_graph()).workflow, True
