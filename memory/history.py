"""Memory versions with their provenance: reading them, and going back — undo what one answer saved, forget what an
abandoned branch saved, restore an earlier version. Every way back is an ordinary versioned write with its own
provenance, so nothing is changed or deleted without a trace.
"""

from __future__ import annotations

from django.db import models
from django.db.models import QuerySet

from core.errors import ServiceError

from . import services
from .models import MemoryItem, MemoryItemHistory, MemoryNamespace
from .provenance import Provenance

_RESTORED_FIELDS = ("title", "content", "category", "tags")
# What of a row's `detail` readers see: what the agent was answering, and which way back an owner's write was.
_SHOWN_DETAIL = ("prompt_excerpt", "agent_name", "undo_of_run", "forgot_branch_runs", "restored_version")


def history_as_dict(row: MemoryItemHistory) -> dict:
    return {
        "id": row.pk,
        "item_id": row.item_id,
        "operation": row.operation,
        "version": row.version,
        "before": row.before,
        "after": row.after,
        "created_at": row.created_at.isoformat(),
        "provenance": {
            "source": row.source,
            "firing_id": str(row.firing_id) if row.firing_id else None,
            "chat_run_id": row.chat_run_id,
            "agent_node_id": row.agent_node_id,
            "generation": row.generation,
            **{k: v for k, v in (row.detail or {}).items() if k in _SHOWN_DETAIL},
        },
    }


def memory_history(
    *,
    namespace: MemoryNamespace,
    item_id: int | None = None,
    chat_run_id: int | None = None,
    agent_node_id: str | None = None,
    limit: int = 100,
    from_chat: bool = False,
    with_ways_back: bool = False,
) -> list[dict]:
    """Versions of the namespace's items, newest first, narrowed to one item, one chat run or one agent.

    `from_chat`: only what answers in the chat wrote. `with_ways_back`: with a chat run (or `from_chat`), also the
    owner's undo and branch-forget rows of it — after an Undo forgot an item, that row is all that is left of it."""
    rows: QuerySet[MemoryItemHistory] = MemoryItemHistory.objects.filter(namespace=namespace)
    if item_id is not None:
        rows = rows.filter(item_id=item_id)
    if chat_run_id is not None:
        wrote = models.Q(chat_run_id=chat_run_id)
        if with_ways_back:
            wrote |= models.Q(detail__undo_of_run=chat_run_id) | models.Q(
                detail__forgot_branch_runs__contains=[chat_run_id]
            )
        rows = rows.filter(wrote)
    if from_chat:
        wrote = models.Q(chat_run_id__isnull=False)
        if with_ways_back:
            wrote |= models.Q(detail__has_key="undo_of_run") | models.Q(detail__has_key="forgot_branch_runs")
        rows = rows.filter(wrote)
    if agent_node_id:
        rows = rows.filter(agent_node_id=agent_node_id)
    return [history_as_dict(row) for row in rows.order_by("-id")[: max(1, min(limit, 500))]]


def memory_run_writes(*, owner, workflow, chat_run_ids: list[int]) -> list[dict]:
    """What the agents of these chat runs wrote to this owner's memory in this workflow, oldest first."""
    rows = MemoryItemHistory.objects.filter(
        namespace__owner_id=owner.pk, namespace__workflow_id=workflow.pk, chat_run_id__in=chat_run_ids, source="agent"
    ).order_by("id")
    return [{**history_as_dict(row), "node_id": row.namespace.node_id} for row in rows.select_related("namespace")]


def _first_write_per_item(owner, workflow, chat_run_ids: list[int]) -> list[MemoryItemHistory]:
    seen: dict[int, MemoryItemHistory] = {}
    rows = MemoryItemHistory.objects.filter(
        namespace__owner_id=owner.pk,
        namespace__workflow_id=workflow.pk,
        chat_run_id__in=chat_run_ids,
        source="agent",
        item_id__isnull=False,
    ).select_related("namespace")
    for row in rows.order_by("id"):
        seen.setdefault(row.item_id, row)
    return list(seen.values())


def _owner_provenance(**detail) -> Provenance:
    return Provenance("owner", detail=detail)


def memory_run_writes_undo(*, owner, workflow, chat_run_id: int) -> dict:
    """Put every item one answer's agents changed back as it was before that answer: an item the answer created is
    forgotten, an item it updated gets its earlier content back (as a new version). Items changed again since are
    taken back all the same (the owner asked to undo); items already forgotten are reported, not recreated."""
    restored, forgotten, gone = [], [], []
    for first in _first_write_per_item(owner, workflow, [chat_run_id]):
        current = MemoryItem.objects.filter(namespace=first.namespace, pk=first.item_id).first()
        if current is None:
            gone.append(first.item_id)
            continue
        provenance = _owner_provenance(undo_of_run=chat_run_id)
        if first.operation == MemoryItemHistory.Operation.REMEMBER:
            services.memory_item_forget(
                namespace=first.namespace,
                item_id=current.pk,
                expected_version=current.version,
                actor=owner,
                provenance=provenance,
            )
            forgotten.append(current.pk)
        elif first.operation == MemoryItemHistory.Operation.UPDATE and first.before:
            patch = {field: first.before[field] for field in _RESTORED_FIELDS if field in first.before}
            services.memory_item_update(
                namespace=first.namespace,
                item_id=current.pk,
                expected_version=current.version,
                patch=patch,
                actor=owner,
                provenance=provenance,
            )
            restored.append(current.pk)
    return {"restored": restored, "forgotten": forgotten, "already_gone": gone}


def memory_runs_created_forget(*, owner, workflow, chat_run_ids: list[int]) -> dict:
    """Forget the items these chat runs' agents created (an abandoned branch's memories), and nothing else."""
    forgotten = []
    for first in _first_write_per_item(owner, workflow, chat_run_ids):
        if first.operation != MemoryItemHistory.Operation.REMEMBER:
            continue
        current = MemoryItem.objects.filter(namespace=first.namespace, pk=first.item_id).first()
        if current is None:
            continue
        services.memory_item_forget(
            namespace=first.namespace,
            item_id=current.pk,
            expected_version=current.version,
            actor=owner,
            provenance=_owner_provenance(forgot_branch_runs=list(chat_run_ids)),
        )
        forgotten.append(current.pk)
    return {"forgotten": forgotten}


def memory_item_restore(
    *,
    namespace: MemoryNamespace,
    item_id: int,
    version: int,
    expected_version: int,
    actor,
    provenance: Provenance,
    announce_to_chat: bool = False,
) -> dict:
    """Make an item's content what it was at `version` again (a new version; `expected_version` guards a
    concurrent edit)."""
    row = (
        MemoryItemHistory.objects.filter(namespace=namespace, item_id=item_id, version=version, after__isnull=False)
        .order_by("-id")
        .first()
    )
    if row is None:
        raise ServiceError("version_not_found", f"Version {version} of this memory is not in its history.", status=404)
    patch = {field: row.after[field] for field in _RESTORED_FIELDS if field in row.after}
    return services.memory_item_update(
        namespace=namespace,
        item_id=item_id,
        expected_version=expected_version,
        patch=patch,
        actor=actor,
        provenance=provenance.with_detail(restored_version=version),
        announce_to_chat=announce_to_chat,
    )


# --- what the chat shows under an answer ------------------------------------------------------------------------


def memory_chat_marks(*, owner_id: int, workflow_id: int, chat_run_ids: list[int]) -> dict[int, dict]:
    """Per chat run: what its agents wrote (items still kept or not), and what the owner took back since (an Undo
    of that answer, or forgetting the branch it was on). Two queries for the whole thread, whatever its length."""
    if not chat_run_ids:
        return {}
    wanted = set(chat_run_ids)
    scope = MemoryItemHistory.objects.filter(namespace__owner_id=owner_id, namespace__workflow_id=workflow_id)
    rows = list(
        scope.filter(chat_run_id__in=chat_run_ids, source="agent")
        .select_related("namespace")
        .order_by("id")
        .only(
            "id",
            "item_id",
            "operation",
            "version",
            "after",
            "detail",
            "chat_run_id",
            "created_at",
            "namespace__node_id",
        )
    )
    # The owner's ways back carry the run they took back in `detail` (an undo's forget row is the only trace left
    # of an item the answer created: forgetting removes the item's earlier rows).
    taken_back = list(
        scope.filter(source="owner")
        .filter(models.Q(detail__has_key="undo_of_run") | models.Q(detail__has_key="forgot_branch_runs"))
        .order_by("id")
        .only("id", "item_id", "operation", "detail")
    )
    live = set(
        MemoryItem.objects.filter(pk__in={row.item_id for row in rows if row.item_id}).values_list("pk", flat=True)
    )
    marks: dict[int, dict] = {}

    def mark(run_id: int) -> dict:
        return marks.setdefault(
            run_id, {"items": [], "undone": {"forgotten": 0, "restored": 0, "last_id": 0}, "branch_forgotten": 0}
        )

    for row in rows:
        entry = mark(row.chat_run_id)
        if any(item["item_id"] == row.item_id for item in entry["items"]):
            continue  # one line per item; its first write in this answer says what the answer did
        after = row.after or {}
        entry["items"].append(
            {
                "item_id": row.item_id,
                "node_id": row.namespace.node_id,
                "operation": row.operation,
                "version": row.version,
                "title": after.get("title") or "",
                "content": str(after.get("content") or "")[:160],
                "kept": row.item_id in live,
                "agent_name": (row.detail or {}).get("agent_name") or "",
                "prompt_excerpt": (row.detail or {}).get("prompt_excerpt") or "",
                "created_at": row.created_at.isoformat(),
                "history_id": row.pk,
            }
        )
    for row in taken_back:
        detail = row.detail or {}
        undo_of = detail.get("undo_of_run")
        if undo_of in wanted:
            undone = mark(undo_of)["undone"]
            undone["forgotten" if row.operation == MemoryItemHistory.Operation.FORGET else "restored"] += 1
            undone["last_id"] = max(undone["last_id"], row.pk)
        for run_id in detail.get("forgot_branch_runs") or []:
            if run_id in wanted:
                mark(run_id)["branch_forgotten"] += 1
    for entry in marks.values():
        # Undo again only when the answer's writes are newer than the last undo (an undo is not undone twice).
        last_undo = entry["undone"]["last_id"]
        entry["can_undo"] = any(item["kept"] and item["history_id"] > last_undo for item in entry["items"])
        entry["saved"] = sum(1 for item in entry["items"] if item["operation"] == MemoryItemHistory.Operation.REMEMBER)
        entry["changed"] = len(entry["items"]) - entry["saved"]
        entry["kept_created"] = sum(
            1 for item in entry["items"] if item["kept"] and item["operation"] == MemoryItemHistory.Operation.REMEMBER
        )
    return marks
