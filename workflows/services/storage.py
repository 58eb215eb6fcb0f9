"""Create, save, load, delete and rename a workflow. Every writer takes the workflow's row lock first
(`workflow_for_update`), so saves, starts and resets serialize on it; anything keyed by the workflow comes after."""

from __future__ import annotations

from django.db import transaction

from core.errors import ConflictError, ServiceError
from core.realtime import publish_workflow_event

from ..events import workflow_updated_event
from ..graph import agent_for_context, agent_nodes, graph_size_issues, normalize_workflow_graph, validate_workflow_graph
from ..locks import workflow_for_update
from ..models import ArchiveOutbox, Workflow
from ..outbox import archive_outbox_write
from .prepare import (
    EMPTY_GRAPH,
    GraphOutcome,
    clean_workflow_name,
    context_node_ids,
    graph_outcome,
    persist_legacy_imports,
    prepare_graph,
    remember_numbers,
    used_numbers,
)


def _publish_updated(workflow: Workflow) -> None:
    publish_workflow_event(
        workflow_id=workflow.pk,
        event=workflow_updated_event(workflow_id=workflow.pk, revision=workflow.revision),
    )


@transaction.atomic
def workflow_create(*, owner, name: str, graph: dict | None = None) -> GraphOutcome:
    name = clean_workflow_name(name)
    graph = EMPTY_GRAPH if graph is None else graph
    size_issues = graph_size_issues(graph)
    if size_issues:
        raise ServiceError("graph_too_large", size_issues[0].message)
    # Canonical ids embed the workflow id, so the row exists before its graph is normalized.
    workflow = Workflow.objects.create(owner=owner, name=name, graph=EMPTY_GRAPH)
    result, warnings = prepare_graph(graph=graph, workflow_id=workflow.pk)
    legacy = persist_legacy_imports(workflow, result)
    remember_numbers(workflow, result.graph)
    workflow.graph = result.graph
    workflow.graph_version = result.graph_version
    workflow.save(update_fields=["graph", "graph_version", "node_numbers", "updated_at"])
    return graph_outcome(workflow, result, warnings, legacy)


def save_graph_locked(locked: Workflow, *, graph: dict, name: str | None) -> GraphOutcome:
    """Store `graph` on a workflow whose row lock the caller holds (a save, or a teammate added)."""
    result, warnings = prepare_graph(graph=graph, workflow_id=locked.pk, used=used_numbers(locked))
    legacy = persist_legacy_imports(locked, result)
    old_graph = locked.graph if isinstance(locked.graph, dict) else EMPTY_GRAPH
    # Save never restores a deleted Context; removing one archives the conversations it kept.
    removed = context_node_ids(old_graph) - context_node_ids(result.graph)
    if removed:
        served = [agent for context in removed if (agent := agent_for_context(old_graph, context))]
        archive_outbox_write(
            workflow_id=locked.pk,
            reason=ArchiveOutbox.Reason.CONTEXT_REMOVED,
            context_node_ids=removed,
            agent_node_ids=served,
        )
    remember_numbers(locked, result.graph)
    locked.graph = result.graph
    locked.graph_version = result.graph_version
    locked.revision += 1
    fields = ["graph", "graph_version", "revision", "node_numbers", "updated_at"]
    if name is not None:
        locked.name = clean_workflow_name(name)
        fields.append("name")
    locked.save(update_fields=fields)
    _publish_updated(locked)
    outcome = graph_outcome(locked, result, warnings, legacy)
    outcome.extra["archived_context_node_ids"] = sorted(removed)
    return outcome


@transaction.atomic
def workflow_save(*, workflow: Workflow, graph: dict, revision: int, name: str | None = None) -> GraphOutcome:
    """Optimistic save: `revision` is the one the client started from; a stale one is a 409 with the current."""
    locked = workflow_for_update(workflow.pk)
    if revision != locked.revision:
        raise ConflictError(
            "revision_conflict",
            "The workflow changed since you loaded it; reload and apply your change again.",
            extra={"current_revision": locked.revision},
        )
    return save_graph_locked(locked, graph=graph, name=name)


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
        return graph_outcome(workflow, result, result.warnings + issues, [])
    with transaction.atomic():
        locked = workflow_for_update(workflow.pk)
        result = normalize_workflow_graph(
            locked.graph if isinstance(locked.graph, dict) else EMPTY_GRAPH,
            workflow_id=locked.pk,
            used_numbers=used_numbers(locked),
        )
        legacy = persist_legacy_imports(locked, result)
        if result.graph != locked.graph:
            remember_numbers(locked, result.graph)
            locked.graph = result.graph
            locked.graph_version = result.graph_version
            locked.revision += 1
            locked.save(update_fields=["graph", "graph_version", "revision", "node_numbers", "updated_at"])
            _publish_updated(locked)
    issues = validate_workflow_graph(result.graph)
    return graph_outcome(locked, result, result.warnings + issues, legacy)


@transaction.atomic
def workflow_delete(*, workflow: Workflow) -> None:
    locked = workflow_for_update(workflow.pk)
    graph = locked.graph if isinstance(locked.graph, dict) else EMPTY_GRAPH
    archive_outbox_write(
        workflow_id=locked.pk,
        reason=ArchiveOutbox.Reason.WORKFLOW_DELETED,
        context_node_ids=context_node_ids(graph),
        agent_node_ids=[node["id"] for node in agent_nodes(graph)],
    )
    locked.delete()


@transaction.atomic
def workflow_rename(*, workflow: Workflow, name: str) -> Workflow:
    """Rename without touching the graph: the revision is for graph edits, so an open editor's save still applies."""
    name = clean_workflow_name(name)
    locked = workflow_for_update(workflow.pk)
    locked.name = name
    locked.save(update_fields=["name", "updated_at"])
    _publish_updated(locked)
    return locked
