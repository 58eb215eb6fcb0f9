"""New workflows from something else: an export document, another workflow, a starter template, the demo."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction

from core.errors import ServiceError

from ..demo import DEMO_WORKFLOW_NAME, demo_graph
from ..models import Workflow
from ..selectors import workflow_export
from ..starters import starter
from .prepare import EMPTY_GRAPH, GraphOutcome
from .storage import workflow_create


def workflow_import(*, owner, document: dict, name: str | None = None) -> GraphOutcome:
    """A new workflow from an export document (or any `{name?, graph}`); ids are re-canonicalized for it."""
    if not isinstance(document, dict) or not isinstance(document.get("graph"), dict):
        raise ServiceError("invalid_import", "An import is a JSON object with a `graph` object.")
    return workflow_create(
        owner=owner, name=name or document.get("name") or "Imported workflow", graph=document["graph"]
    )


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
