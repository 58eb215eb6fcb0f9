"""What the chat shows of memory an answer saved: the marker under each answer (with Undo) and, beside a message
the owner edited or tried again, what the versions left behind saved ("keep / forget").

Read from the memory app's selector (`memory.history.memory_chat_marks`) for every run of the session at once, so the
snapshot costs the same two queries however long the thread is.
"""

from __future__ import annotations

from memory.history import memory_chat_marks


def _subtree(root: int, children: dict[int | None, list[int]]) -> list[int]:
    out, stack = [], [root]
    while stack:
        pk = stack.pop()
        out.append(pk)
        stack.extend(children.get(pk, []))
    return out


def branch_run_ids(root: int, children: dict[int | None, list[int]], runs) -> list[int]:
    """The runs that answered on the branch starting at `root`: any run whose message or reply lies under it (an
    edit leaves an owner's message with its answers; Try again leaves an answer, whose run answered its parent)."""
    below = set(_subtree(root, children))
    return [run.pk for run in runs if run.user_message_id in below or run.reply_message_id in below]


def chat_memory_marks(*, workflow, path, messages, children, runs) -> dict:
    marks = memory_chat_marks(
        owner_id=workflow.owner_id, workflow_id=workflow.pk, chat_run_ids=[run.pk for run in runs]
    )
    on_path = {message.pk for message in path}
    left: dict[int, list[dict]] = {}
    for message in path:
        siblings = [
            pk
            for pk in children.get(message.parent_id, [])
            if pk != message.pk and messages[pk].role == message.role and pk not in on_path
        ]
        ordered = sorted(pk for pk in children.get(message.parent_id, []) if messages[pk].role == message.role)
        for sibling in sorted(siblings):
            run_ids = branch_run_ids(sibling, children, runs)
            items = [item for run_id in run_ids for item in (marks.get(run_id) or {}).get("items", [])]
            kept = [item for item in items if item["kept"] and item["operation"] == "remember"]
            forgotten = sum((marks.get(run_id) or {}).get("branch_forgotten", 0) for run_id in run_ids)
            if kept or forgotten:
                left.setdefault(message.pk, []).append(
                    {
                        "message_id": sibling,
                        "version": ordered.index(sibling) + 1,
                        "role": messages[sibling].role,
                        "kept": len(kept),
                        "forgotten": forgotten,
                        "items": kept[:20],
                    }
                )
    return {
        "runs": {str(run_id): mark for run_id, mark in marks.items() if mark["items"] or mark["undone"]["last_id"]},
        "left": {str(pk): versions for pk, versions in left.items()},
    }
