"""The Memory panel: a server-rendered client of the same services and selectors as the REST API."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.dateparse import parse_datetime
from django.utils.http import urlencode
from django.views.decorators.http import require_http_methods, require_POST

from core.errors import ConflictError, NotFoundError, ServiceError
from workflows.selectors import generation_graph

from . import selectors, services
from .access import memory_namespace_or_404
from .history_views import annotate_latest_provenance
from .provenance import Provenance


def _panel_url(workflow_id, node_id, **query) -> str:
    url = reverse("memory-panel", kwargs={"workflow_id": workflow_id, "node_id": node_id})
    query = {k: v for k, v in query.items() if v}
    return f"{url}?{urlencode(query)}" if query else url


def _tags(raw: str) -> list[str]:
    return [tag.strip() for tag in (raw or "").split(",") if tag.strip()]


def _actor(request) -> str:
    return f"owner:{request.user.pk}"


# What the panel says about an item's index, only when it matters to the owner (text search always works).
INDEX_WORDS = {
    "pending": "being indexed for search by meaning",
    "not_indexed": "not yet searchable by meaning",
    "failed": "could not be indexed for search by meaning",
}


def _when(value):
    return parse_datetime(value) if isinstance(value, str) else value


def _for_owner(item: dict) -> dict:
    """An item as the panel shows it: times as datetimes (shown in words, then in local time), a heading even
    without a title, the index state in words only when it is not simply searchable."""
    content = item.get("content") or ""
    first_line = content.strip().splitlines()[0] if content.strip() else ""
    return {
        **item,
        "heading": item.get("title") or (first_line[:80] + ("…" if len(first_line) > 80 else "")) or "A memory",
        "created": _when(item.get("created_at")),
        "updated": _when(item.get("updated_at")),
        "expires": _when(item.get("expires_at")),
        "expires_input": _when(item.get("expires_at")).strftime("%Y-%m-%dT%H:%M") if item.get("expires_at") else "",
        "index_words": INDEX_WORDS.get(item.get("indexing_state") or "", ""),
    }


def _node_label(workflow, node_id: str) -> str:
    try:
        graph = generation_graph(workflow)
    except NotFoundError:
        return "Memory"
    node = next((n for n in graph.get("nodes", []) if n.get("id") == node_id), None) or {}
    params = node.get("params") or {}
    return str(params.get("name") or params.get("label") or "Memory")


def _panel(request, workflow, namespace, node_id: str, *, query: str, cursor=None, conflict=None, status=200):
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
    # Provenance hook (memory/history_views.py): where each item's current version came from, in words.
    annotate_latest_provenance(namespace=namespace, items=page["items"], workflow_id=workflow.pk)
    return render(
        request,
        "memory/panel.html",
        {
            "workflow": workflow,
            "node_id": node_id,
            "node_label": _node_label(workflow, node_id),
            "query": query,
            "items": [_for_owner(item) for item in page["items"]],
            "search": page.get("search"),
            "next_url": next_url,
            "first_url": _panel_url(workflow.pk, node_id, q=query) if cursor else None,
            "error": error,
            "conflict": conflict,
        },
        status=status,
    )


@login_required
@require_http_methods(["GET"])
def memory_panel(request, workflow_id: int, node_id: str):
    workflow, namespace = memory_namespace_or_404(request, workflow_id, node_id, create=False)
    query = request.GET.get("q", "").strip()
    return _panel(request, workflow, namespace, node_id, query=query, cursor=request.GET.get("cursor") or None)


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
    workflow, namespace = memory_namespace_or_404(request, workflow_id, node_id)
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
    workflow, namespace = memory_namespace_or_404(request, workflow_id, node_id)
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
    except ConflictError as exc:
        if "current_version" not in exc.extra:
            _report(request, exc)
            return redirect(_panel_url(workflow.pk, node_id, q=request.POST.get("q", "")))
        # Someone (the agent, another tab) changed it meanwhile: keep the owner's draft and show the current
        # version beside it; saving again replaces the current version with the draft, on purpose.
        try:
            current = selectors.memory_item_get(namespace=namespace, item_id=item_id)["item"]
        except ServiceError:
            current = None
        conflict = {
            "item_id": int(item_id),
            "draft": {**patch, "tags": ", ".join(patch["tags"])},
            "current": _for_owner(current) if current else None,
            "current_version": exc.extra["current_version"],
        }
        query = request.POST.get("q", "").strip()
        return _panel(request, workflow, namespace, node_id, query=query, conflict=conflict, status=409)
    except ServiceError as exc:
        _report(request, exc)
    return redirect(_panel_url(workflow.pk, node_id, q=request.POST.get("q", "")))


@login_required
@require_POST
def memory_item_forget(request, workflow_id: int, node_id: str, item_id: int):
    workflow, namespace = memory_namespace_or_404(request, workflow_id, node_id)
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
    workflow, namespace = memory_namespace_or_404(request, workflow_id, node_id, create=request.method == "POST")
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
