"""The owner's workflow pages: the list (home), the editor, the run history, and the list's form actions.

Pages only read through selectors and write through services; the editor itself talks to the REST API
(/api/node-types/, /api/workflows/<id>/...) from static/js/workflow_editor.js.
"""

from __future__ import annotations

import json

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from core.errors import NotFoundError, ServiceError

from . import services
from .selectors import access_workflow, workflows_overview
from .starters import STARTERS


def _import_max_bytes() -> int:
    # An export is the graph plus a few header fields: room for the largest graph a save accepts, and no more.
    return settings.WORKFLOW_MAX_GRAPH_BYTES + 64 * 1024


def workflow_or_404(request, workflow_id):
    try:
        return access_workflow(user=request.user, workflow_id=workflow_id)
    except NotFoundError:
        raise Http404("Workflow not found.") from None


@login_required
def workflows_home(request):
    context = {"rows": workflows_overview(user=request.user), "starters": STARTERS}
    return render(request, "home.html", context)


@login_required
@require_POST
def workflow_new(request):
    try:
        outcome = services.workflow_create_from_starter(
            owner=request.user, starter_key=request.POST.get("template", "blank"), name=request.POST.get("name")
        )
    except ServiceError as exc:
        messages.error(request, exc.message)
        return redirect("home")
    return redirect("workflow-detail", outcome.workflow.pk)


@login_required
@require_POST
def workflow_import_page(request):
    upload = request.FILES.get("document")
    limit = _import_max_bytes()
    raw = upload.read(limit + 1) if upload else request.POST.get("document_text", "").encode()
    if not raw.strip():
        messages.error(request, "Choose a workflow's export file (.json) to import.")
        return redirect("home")
    if len(raw) > limit:
        messages.error(request, f"That file is larger than {limit // 1024} KB, more than a workflow export can be.")
        return redirect("home")
    try:
        document = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        messages.error(request, "That file is not JSON. Import takes the file the editor's Export button saves.")
        return redirect("home")
    try:
        outcome = services.workflow_import(
            owner=request.user, document=document, name=(request.POST.get("name") or "").strip() or None
        )
    except ServiceError as exc:
        detail = ", ".join(sorted({i.get("code", "") for i in (exc.extra or {}).get("issues", [])}))
        messages.error(request, f"Import refused: {exc.message}" + (f" ({detail})" if detail else ""))
        return redirect("home")
    for warning in outcome.warnings:
        messages.warning(request, f"{warning.get('code')}: {warning.get('message')}")
    messages.success(request, f"Imported “{outcome.workflow.name}”.")
    return redirect("workflow-detail", outcome.workflow.pk)


@login_required
@require_POST
def workflow_rename_page(request, workflow_id: int):
    workflow = workflow_or_404(request, workflow_id)
    try:
        services.workflow_rename(workflow=workflow, name=request.POST.get("name", ""))
    except ServiceError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, "Renamed.")
    return redirect("home")


@login_required
@require_POST
def workflow_duplicate_page(request, workflow_id: int):
    workflow = workflow_or_404(request, workflow_id)
    outcome = services.workflow_duplicate(workflow=workflow)
    messages.success(request, f"Made “{outcome.workflow.name}”, a copy that was never started.")
    return redirect("home")


@login_required
@require_http_methods(["GET", "POST"])
def workflow_delete_page(request, workflow_id: int):
    workflow = workflow_or_404(request, workflow_id)
    if request.method == "POST":
        name = workflow.name
        services.workflow_delete(workflow=workflow)
        messages.success(request, f"Deleted “{name}”. Its stored conversations are being cleared.")
        return redirect("home")
    return render(request, "workflows/delete.html", {"workflow": workflow})


@login_required
def workflow_detail(request, workflow_id: int):
    """The editor: the canvas, palette and side panel are drawn by workflow_editor.js from the API."""
    workflow = workflow_or_404(request, workflow_id)
    outcome = services.workflow_load(workflow=workflow)
    workflow = outcome.workflow
    config = {
        "workflowId": workflow.pk,
        "name": workflow.name,
        "api": f"/api/workflows/{workflow.pk}/",
        "nodeTypesUrl": reverse("node-types"),
        "chatUrl": reverse("chat-page", args=[workflow.pk]),
        "runsUrl": reverse("workflow-runs", args=[workflow.pk]),
        "exportUrl": reverse("workflows-export", args=[workflow.pk]),
        "contextPanelUrl": reverse("conversations:context-panel", args=[workflow.pk]) + "?node=",
        "memoryPanelUrl": f"/workflows/{workflow.pk}/memory/",
        "homeUrl": reverse("home"),
        "validateDelayMs": settings.WORKFLOW_EDITOR_VALIDATE_DELAY_MS,
    }
    return render(request, "workflows/editor.html", {"workflow": workflow, "editor_config": config})
