"""Files attached to the owner's messages (docs/chat.md#files). A message keeps `meta["files"]`: the `file` blocks
(providers/wire.py: hash, media type, name, size; never the bytes) with the uploaded file's id, which the page
downloads through. The answering firing gets the blocks after the message's text (chat_run_prepared)."""

from __future__ import annotations

from django.db import connection

from chat.models import ChatBranchSnapshot, ChatMessage, ChatSession
from files.services import files_for_message
from workflows.models import Workflow


def message_files_meta(*, owner, file_ids: list | None) -> list[dict]:
    """What a new message keeps of the owner's uploaded files `file_ids` (refused as files/services.py says)."""
    return [{"id": stored.pk, **stored.block()} for stored in files_for_message(owner=owner, file_ids=file_ids or [])]


def message_file_blocks(message: ChatMessage | None) -> tuple[dict, ...]:
    """The `file` blocks of a message, as the stored conversation holds them."""
    files = ((message.meta or {}).get("files") or []) if message is not None else []
    return tuple({key: value for key, value in f.items() if key != "id"} for f in files)


def chat_file_references(hashes: set[str]) -> list[tuple[int, str]]:
    """(owner id, sha256) of the candidate hashes the chat still refers to: its messages' attachments and the
    stored conversations kept under branches the owner moved away from (restored on switch)."""
    candidates = sorted(hashes)
    found: list[tuple[int, str]] = []
    with connection.cursor() as cursor:
        for table, column in (
            (ChatMessage._meta.db_table, "meta"),
            (ChatBranchSnapshot._meta.db_table, "messages"),
        ):
            cursor.execute(
                f"SELECT DISTINCT w.owner_id, h FROM {table} AS t "
                f"JOIN {ChatSession._meta.db_table} AS s ON s.id = t.session_id "
                f"JOIN {Workflow._meta.db_table} AS w ON w.id = s.workflow_id "
                "CROSS JOIN unnest(%s::text[]) AS h "
                f"WHERE t.{column}::text LIKE '%%' || h || '%%'",
                [candidates],
            )
            found.extend(cursor.fetchall())
    return found
