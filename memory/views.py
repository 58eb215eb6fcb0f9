"""The Memory panel: a server-rendered client of the same services and selectors as the REST API."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_http_methods, require_POST

from opencompany.errors import ConflictError, NotFoundError, ServiceError

from . import selectors, services
from .access import access_memory_namespace
from .provenance import Provenance


def _access(request, workflow_id, node_id, *, create: bool = True):
    try:
        return access_memory_namespace(user=request.user, workflow_id=workflow_id, node_id=node_id, create=create)
    except NotFoundError:
        raise Http404("Memory node not found") from None


def _panel_url(workflow_id, node_id, **query) -> str:
    url = reverse("memory-panel", kwargs={"workflow_id": workflow_id, "node_id": node_id})
    query = {k: v for k, v in query.items() if v}
    return f"{url}?{urlencode(query)}" if query else url


def _tags(raw: str) -> list[str]:
    return [tag.strip() for tag in (raw or "").split(",") if tag.strip()]


def _actor(request) -> str:
    return f"owner:{request.user.pk}"


@login_required
@require_http_methods(["GET"])
def memory_panel(request, workflow_id: int, node_id: str):
    workflow, namespace = _access(request, workflow_id, node_id, create=False)
    query = request.GET.get("q", "").strip()
    cursor = request.GET.get("cursor") or None
    error = None
    try:
        if namespace is None:  # nothing stored yet, and a GET creates nothing
            page = {"items": [], "next_cursor": None}
        elif query:
            page = selectors.memory_items_recall(namespace=namespace, query=query, cursor=cursor, limit=20)
        else:
            page = selectors.memory_items_list(namespace=namespace, cursor=cursor, limit=20)
    except ServiceError as exc:
        error = exc.message
        page = {"items": [], "next_cursor": None}
    next_url = _panel_url(workflow.pk, node_id, q=query, cursor=page["next_cursor"]) if page["next_cursor"] else None
    return render(
        request,
        "memory/panel.html",
        {
            "workflow": workflow,
            "node_id": node_id,
            "query": query,
            "items": page["items"],
            "search": page.get("search"),
            "next_url": next_url,
            "first_url": _panel_url(workflow.pk, node_id, q=query) if cursor else None,
            "error": error,
        },
    )


def _report(request, exc: ServiceError) -> None:
    if isinstance(exc, ConflictError) and "current_version" in exc.extra:
        messages.error(
            request,
            f"This memory changed while you were editing it (now version {exc.extra['current_version']}). "
            "Your change was not saved; review the current text and try again.",
        )
    else:
        messages.error(request, exc.message)


@login_required
@require_POST
def memory_item_create(request, workflow_id: int, node_id: str):
    workflow, namespace = _access(request, workflow_id, node_id)
    try:
        services.memory_item_remember(
            namespace=namespace,
            content=request.POST.get("content", ""),
            title=request.POST.get("title", ""),
            category=request.POST.get("category", ""),
            tags=_tags(request.POST.get("tags", "")),
            expires_at=request.POST.get("expires_at") or None,
            actor=_actor(request),
            provenance=Provenance("owner"),
            announce_to_chat=True,
        )
        messages.success(request, "Memory saved.")
    except ServiceError as exc:
        _report(request, exc)
    return redirect(_panel_url(workflow.pk, node_id))


@login_required
@require_POST
def memory_item_edit(request, workflow_id: int, node_id: str, item_id: int):
    workflow, namespace = _access(request, workflow_id, node_id)
    patch = {
        "content": request.POST.get("content", ""),
        "title": request.POST.get("title", ""),
        "category": request.POST.get("category", ""),
        "tags": _tags(request.POST.get("tags", "")),
        "expires_at": request.POST.get("expires_at") or None,
    }
    try:
        services.memory_item_update(
            namespace=namespace,
            item_id=item_id,
            expected_version=request.POST.get("expected_version"),
            patch=patch,
            actor=_actor(request),
            provenance=Provenance("owner"),
            announce_to_chat=True,
        )
        messages.success(request, "Memory updated.")
    except ServiceError as exc:
        _report(request, exc)
    return redirect(_panel_url(workflow.pk, node_id, q=request.POST.get("q", "")))


@login_required
@require_POST
def memory_item_forget(request, workflow_id: int, node_id: str, item_id: int):
    workflow, namespace = _access(request, workflow_id, node_id)
    try:
        services.memory_item_forget(
            namespace=namespace,
            item_id=item_id,
            expected_version=request.POST.get("expected_version"),
            actor=_actor(request),
            provenance=Provenance("owner"),
            announce_to_chat=True,
        )
        messages.success(request, "Memory forgotten.")
    except ServiceError as exc:
        _report(request, exc)
    return redirect(_panel_url(workflow.pk, node_id, q=request.POST.get("q", "")))


@login_required
@require_http_methods(["GET", "POST"])
def memory_clear(request, workflow_id: int, node_id: str):
    """GET asks for confirmation; only the confirmed POST clears."""
    workflow, namespace = _access(request, workflow_id, node_id, create=request.method == "POST")
    if request.method == "POST" and request.POST.get("confirm") == "yes":
        count = services.memory_namespace_items_clear(namespace=namespace, actor=_actor(request), announce_to_chat=True)
        messages.success(request, f"Memory cleared: {count} item(s) removed.")
        return redirect(_panel_url(workflow.pk, node_id))
    return render(
        request,
        "memory/clear_confirm.html",
        {
            "workflow": workflow,
            "node_id": node_id,
            "count": selectors.live_items(namespace).count() if namespace is not None else 0,
        },
    )
