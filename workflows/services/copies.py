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


def free_name(*, owner, wanted: str, tag: str) -> str:
    """`wanted`, or, when the owner has a workflow of that name, `wanted (tag)`, `wanted (tag 2)`, ...: two
    workflows in the list never read alike. Cut to the name limit before the tag."""
    wanted = (wanted or "").strip()
    taken = set(Workflow.objects.filter(owner=owner, name__startswith=wanted[:100]).values_list("name", flat=True))
    if wanted and wanted not in taken:
        return wanted
    limit = settings.WORKFLOW_NAME_MAX_CHARS
    for number in range(1, 1000):
        suffix = f" ({tag})" if number == 1 else f" ({tag} {number})"
        candidate = wanted[: limit - len(suffix)].rstrip() + suffix
        if candidate not in taken:
            return candidate
    raise ServiceError("invalid_name", "Too many workflows share this name; choose another one.")


def _from_document(*, owner, document: dict, name: str) -> GraphOutcome:
    if not isinstance(document, dict) or not isinstance(document.get("graph"), dict):
        raise ServiceError("invalid_import", "An import is a JSON object with a `graph` object.")
    return workflow_create(owner=owner, name=name, graph=document["graph"])


def workflow_import(*, owner, document: dict, name: str | None = None) -> GraphOutcome:
    """A new workflow from an export document (or any `{name?, graph}`); ids are re-canonicalized for it. A name
    the owner already uses gets " (imported)" (then a number)."""
    wanted = name or (document.get("name") if isinstance(document, dict) else None) or "Imported workflow"
    if not isinstance(wanted, str):
        wanted = "Imported workflow"
    return _from_document(owner=owner, document=document, name=free_name(owner=owner, wanted=wanted, tag="imported"))


def workflow_duplicate(*, workflow: Workflow, name: str | None = None) -> GraphOutcome:
    """A new workflow of the same owner with a copy of the graph (fresh canonical ids). Nothing that ran is
    copied: no generations, conversations, memory items or todos — the copy is a draft that was never started."""
    document = workflow_export(workflow=workflow)
    copy_name = name or free_name(owner=workflow.owner, wanted=workflow.name, tag="copy")
    return _from_document(owner=workflow.owner, document=document, name=copy_name)


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
