"""The Memory panel's history pages: what changed and where each version came from (in plain words), one item's
versions side by side with the change marked, "Restore this version", and the filters "what the chat wrote",
"what one answer wrote", "what one agent wrote" (the chat's "Saved N memories" marker links here).

Server-rendered clients of `memory.history` (the same selectors and services as the REST API).
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.dateparse import parse_datetime
from django.utils.http import urlencode
from django.views.decorators.http import require_GET, require_POST

from core.errors import ConflictError, ServiceError

from .access import memory_namespace_or_404
from .diff import inline_diff, word_diff
from .history import history_as_dict, memory_history, memory_item_restore
from .models import MemoryItem, MemoryItemHistory
from .provenance import Provenance

_DONE = {"remember": "Saved", "update": "Changed", "forget": "Forgotten", "clear": "Memory cleared"}


def _quote(text: str, limit: int = 60) -> str:
    flat = " ".join(str(text or "").split()).rstrip("…")
    cut = len(flat) > limit or str(text or "").endswith("…")
    return "“" + flat[:limit].rstrip() + ("…" if cut else "") + "”"


def _chat_url(workflow_id: int, chat_run_id) -> str:
    return reverse("chat-page", kwargs={"workflow_id": workflow_id}) + f"#run-{chat_run_id}"


def provenance_in_words(version: dict, *, workflow_id: int) -> dict:
    """What a version's provenance says to the owner: `who` ("by Lead while answering “my cat is Tom…”"), and a
    link to the chat answer it came from or undid, when there is one."""
    p = version["provenance"]
    source = p.get("source")
    link = None
    if source == "agent":
        who = "by " + (p.get("agent_name") or "the agent")
        if p.get("prompt_excerpt"):
            who += " while answering " + _quote(p["prompt_excerpt"])
        elif p.get("chat_run_id"):
            who += " while answering in the chat"
        else:
            who += " in a workflow run"
        if p.get("chat_run_id"):
            link = {"url": _chat_url(workflow_id, p["chat_run_id"]), "label": "the answer in the chat"}
    elif source == "owner":
        if p.get("undo_of_run"):
            who = "by you: Undo of what an answer saved"
            link = {"url": _chat_url(workflow_id, p["undo_of_run"]), "label": "the answer you undid"}
        elif p.get("forgot_branch_runs"):
            who = "by you: forgetting what an earlier version of the chat saved"
        elif p.get("restored_version"):
            who = f"by you: version {p['restored_version']} restored"
        else:
            who = "by you in the Memory panel"
    elif source == "api":
        who = "by you through the API"
    elif source == "staff":
        who = "by staff in the admin"
    else:
        who = "by the system"
    return {"who": who, "link": link}


def _version_for_owner(version: dict, *, workflow_id: int, current: MemoryItem | None) -> dict:
    before, after = version.get("before") or {}, version.get("after") or {}
    content_before, content_after = word_diff(before.get("content") or "", after.get("content") or "")
    title_before, title_after = word_diff(before.get("title") or "", after.get("title") or "")
    restorable = (
        current is not None
        and version["operation"] in ("remember", "update")
        and bool(after)
        and version["version"] != current.version
    )
    return {
        **version,
        "done": _DONE.get(version["operation"], version["operation"]),
        "when": parse_datetime(version["created_at"]),
        "provenance_words": provenance_in_words(version, workflow_id=workflow_id),
        "has_before": bool(before) and version["operation"] == "update",
        "content_before": content_before,
        "content_after": content_after,
        "content_inline": inline_diff(before.get("content") or "", after.get("content") or ""),
        "title_before": title_before if before.get("title") or after.get("title") else [],
        "title_after": title_after if before.get("title") or after.get("title") else [],
        "other_changes": _other_changes(before, after) if version["operation"] == "update" else [],
        "heading": after.get("title") or (after.get("content") or "")[:80] or f"Memory #{version['item_id']}",
        "restorable": restorable,
        "is_current": current is not None and version["version"] == current.version and bool(after),
    }


def _other_changes(before: dict, after: dict) -> list[str]:
    changes = []
    if (before.get("category") or "") != (after.get("category") or ""):
        changes.append(f"category {before.get('category') or '(none)'} → {after.get('category') or '(none)'}")
    if list(before.get("tags") or []) != list(after.get("tags") or []):
        changes.append(
            f"tags {', '.join(before.get('tags') or []) or '(none)'} → {', '.join(after.get('tags') or []) or '(none)'}"
        )
    if (before.get("expires_at") or None) != (after.get("expires_at") or None):
        changes.append("expiry changed")
    return changes


def _int(value) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _history_url(workflow_id: int, node_id: str, **query) -> str:
    url = reverse("memory-history-page", kwargs={"workflow_id": workflow_id, "node_id": node_id})
    query = {k: v for k, v in query.items() if v}
    return f"{url}?{urlencode(query)}" if query else url


@login_required
@require_GET
def memory_history_page(request, workflow_id: int, node_id: str):
    """Every change in this memory, newest first; `?chat=1` what the chat wrote, `?chat_run=` what one answer
    wrote (and what taking it back did), `?agent=` what one agent wrote."""
    workflow, namespace = memory_namespace_or_404(request, workflow_id, node_id, create=False)  # a GET creates nothing
    chat_run = _int(request.GET.get("chat_run"))
    agent = (request.GET.get("agent") or "").strip()[:200]
    from_chat = request.GET.get("chat") == "1"
    versions = (
        memory_history(
            namespace=namespace,
            chat_run_id=chat_run,
            agent_node_id=agent or None,
            from_chat=from_chat,
            with_ways_back=True,
            limit=200,
        )
        if namespace is not None
        else []
    )
    live = {
        item.pk: item for item in MemoryItem.objects.filter(pk__in={v["item_id"] for v in versions if v["item_id"]})
    }
    rows = [_version_for_owner(v, workflow_id=workflow.pk, current=live.get(v["item_id"])) for v in versions]
    for row in rows:
        row["kept"] = row["item_id"] in live
    agents = {}
    for agent_node_id, name in (
        MemoryItemHistory.objects.filter(namespace_id=namespace.pk if namespace else None, source="agent")
        .exclude(agent_node_id="")
        .values_list("agent_node_id", "detail__agent_name")
        .distinct()[:20]
    ):
        agents.setdefault(agent_node_id, name or "the agent")
    filters = [
        {
            "label": "Everything",
            "url": _history_url(workflow.pk, node_id),
            "active": not (chat_run or agent or from_chat),
        }
    ]
    filters.append(
        {"label": "What the chat wrote", "url": _history_url(workflow.pk, node_id, chat="1"), "active": from_chat}
    )
    for agent_node_id, name in agents.items():
        filters.append(
            {
                "label": f"What {name} wrote",
                "url": _history_url(workflow.pk, node_id, agent=agent_node_id),
                "active": agent == agent_node_id,
            }
        )
    if chat_run:
        filters.append(
            {
                "label": "What one answer wrote",
                "url": _history_url(workflow.pk, node_id, chat_run=chat_run),
                "active": True,
            }
        )
    return render(
        request,
        "memory/history.html",
        {
            "workflow": workflow,
            "node_id": node_id,
            "rows": rows,
            "filters": filters,
            "chat_run": chat_run,
            "chat_run_url": _chat_url(workflow.pk, chat_run) if chat_run else None,
            "agent_name": agents.get(agent, "the agent") if agent else "",
            "from_chat": from_chat,
            "panel_url": reverse("memory-panel", kwargs={"workflow_id": workflow.pk, "node_id": node_id}),
        },
    )


@login_required
@require_GET
def memory_item_history_page(request, workflow_id: int, node_id: str, item_id: int):
    """One item's versions, newest first, each beside the one before it with the change marked."""
    workflow, namespace = memory_namespace_or_404(request, workflow_id, node_id, create=False)
    if namespace is None:
        raise Http404("No such memory.")
    current = MemoryItem.objects.filter(namespace=namespace, pk=item_id).first()
    versions = memory_history(namespace=namespace, item_id=item_id, limit=200)
    rows = [_version_for_owner(v, workflow_id=workflow.pk, current=current) for v in versions]
    heading = (current.title or current.content[:80]) if current else f"Memory #{item_id}"
    return render(
        request,
        "memory/item_history.html",
        {
            "workflow": workflow,
            "node_id": node_id,
            "item_id": item_id,
            "current": current,
            "heading": heading,
            "rows": rows,
            "panel_url": reverse("memory-panel", kwargs={"workflow_id": workflow.pk, "node_id": node_id}),
            "history_url": _history_url(workflow.pk, node_id),
        },
        status=200 if rows or current else 404,
    )


@login_required
@require_POST
def memory_item_restore_page(request, workflow_id: int, node_id: str, item_id: int):
    """Restore a version (a new version, version-checked). A conflict says so and brings the owner back to the
    version they chose, so they can look at the newest one and choose again."""
    workflow, namespace = memory_namespace_or_404(request, workflow_id, node_id, create=False)
    if namespace is None:  # nothing was ever stored here, so there is nothing to restore
        raise Http404("No such memory.")
    version = _int(request.POST.get("version"))
    back = reverse(
        "memory-item-history-page", kwargs={"workflow_id": workflow.pk, "node_id": node_id, "item_id": item_id}
    )
    try:
        result = memory_item_restore(
            namespace=namespace,
            item_id=item_id,
            version=version or 0,
            expected_version=request.POST.get("expected_version"),
            actor=f"owner:{request.user.pk}",
            provenance=Provenance("owner"),
            announce_to_chat=True,
        )
        messages.success(request, f"Version {version} restored: it is now version {result['item']['version']}.")
        return redirect(back + "#current")
    except ConflictError as exc:
        now = exc.extra.get("current_version")
        messages.error(
            request,
            f"Not restored: this memory changed while you were looking (it is now version {now}). "
            f"Version {version} is still here; compare it with the newest version at the top and restore it again "
            "if you still want it.",
        )
    except ServiceError as exc:
        messages.error(request, f"Not restored: {exc.message}")
    return redirect(back + (f"#version-{version}" if version else ""))


def annotate_latest_provenance(*, namespace, items: list[dict], workflow_id: int) -> list[dict]:
    """Give each panel item the words for where its current version came from (one query for the page)."""
    ids = [item["id"] for item in items]
    if not ids:
        return items
    latest = {
        row.item_id: row
        for row in MemoryItemHistory.objects.filter(namespace=namespace, item_id__in=ids)
        .order_by("item_id", "-id")
        .distinct("item_id")
    }
    for item in items:
        row = latest.get(item["id"])
        if row is None:
            continue
        version = history_as_dict(row)
        item["provenance_words"] = {
            "done": _DONE.get(version["operation"], version["operation"]),
            **provenance_in_words(version, workflow_id=workflow_id),
        }
    return items
