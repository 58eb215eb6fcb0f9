#!/usr/bin/env python
"""What attached files cost the database, and how long an owner waits from pressing upload to the first word.

Two workflows of the same shape (a chat trigger, an offline agent with a Context) each get N turns (default 100)
through a real web server (daphne), a real Celery worker and the Redis broker / channel layer, as the page sends
them: one with plain messages, one where every message carries a ~200 KB PNG (uploaded first with POST /api/files/,
then named in `file_ids`). Turn i carries image i % DISTINCT (default 50), so every image is sent twice.

It prints:
  * the bytes the database grew by for each workflow's turns (pg_total_relation_size of every table, indexes and
    TOAST included, each table VACUUM FULLed before each phase so an earlier run's free space absorbs neither), and
    the difference the images made, against the image bytes sent (target: under 1 %), with the tables it is in;
  * the bytes of the rows each workflow's turns keep (pg_column_size of its chat messages and runs, firings and
    steps, stored conversation rows, and the file rows), the exact form of the same comparison;
  * what the stored conversations hold (their size_bytes), and what file storage holds: objects and bytes (target:
    one object per distinct image);
  * upload -> first text delta on the page's socket, p50/p95 (the upload's request, the send, the answer's first
    delta), and the 1-minute load average before and after.

    OPENCOMPANY_DATA_DIR=/tmp/oc-bench .venv/bin/python bench/attachments.py [--turns 100] [--distinct 50]

File storage is a temporary folder (FILE_STORAGE_DIR) the web server and worker share; the run removes what it made.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
STORAGE_DIR = tempfile.mkdtemp(prefix="oc-bench-files-")
os.environ["FILE_STORAGE_DIR"] = STORAGE_DIR  # this process and the web server and worker it starts (their env)
# The socket listener says it comes from http://127.0.0.1 (the port-less origin chat_latency's listener sends).
os.environ.setdefault("WEBSOCKET_ALLOWED_ORIGINS", "http://127.0.0.1")
os.environ.setdefault("ALLOWED_HOSTS", "127.0.0.1,localhost")
os.environ.setdefault("SECURE_SSL_REDIRECT", "0")  # plain http on loopback
# One owner sends hundreds of messages and uploads a minute here: the rate limits are not what this measures.
os.environ.setdefault("THROTTLE_RATE_CHAT_SEND", "100000/minute")
os.environ.setdefault("THROTTLE_RATE_FILE_UPLOAD", "100000/minute")

from chat_latency import SocketListener, free_port, make_workflow, start, wait_port  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.utils import timezone  # noqa: E402
from figures import percentile  # noqa: E402

from accounts.tokens import api_token_create  # noqa: E402
from conversations.models import AgentConversation  # noqa: E402
from tests.files.samples import png_of_size  # noqa: E402
from workflows.services import workflow_delete  # noqa: E402

IMAGE_BYTES = 200 * 1024


def table_bytes() -> dict[str, int]:
    """Every table's size, indexes and TOAST included."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind = 'r'"
        )
        return dict(cursor.fetchall())


def compact_tables() -> None:
    """VACUUM FULL every table, so free space that deleted rows left behind (an earlier run's) absorbs neither
    phase's growth: both start from tables holding only live rows."""
    with connection.cursor() as cursor:
        for name in sorted(table_bytes()):
            cursor.execute(f'VACUUM (FULL) "{name}"')


def row_bytes(workflow, *, files_since=None) -> int:
    """The bytes of the rows a workflow's turns left (pg_column_size of each row: chat messages and runs, firings
    and their steps, the stored conversation), plus the file rows uploaded since `files_since`: what its turns
    keep in PostgreSQL, free of the page-level noise of table sizes."""
    from agents.models import Firing, LlmStep
    from chat.models import ChatMessage, ChatRun, ChatSession
    from conversations.models import ConversationMessage
    from files.models import StoredFile

    queries = [
        (f"SELECT COALESCE(SUM(pg_column_size(t.*)), 0) FROM {ChatMessage._meta.db_table} t "
         f"JOIN {ChatSession._meta.db_table} s ON s.id = t.session_id WHERE s.workflow_id = %s", [workflow.pk]),
        (f"SELECT COALESCE(SUM(pg_column_size(t.*)), 0) FROM {ChatRun._meta.db_table} t "
         f"JOIN {ChatSession._meta.db_table} s ON s.id = t.session_id WHERE s.workflow_id = %s", [workflow.pk]),
        (f"SELECT COALESCE(SUM(pg_column_size(t.*)), 0) FROM {Firing._meta.db_table} t WHERE t.workflow_id = %s",
         [workflow.pk]),
        (f"SELECT COALESCE(SUM(pg_column_size(t.*)), 0) FROM {LlmStep._meta.db_table} t "
         f"JOIN {Firing._meta.db_table} f ON f.id = t.firing_id WHERE f.workflow_id = %s", [workflow.pk]),
        (f"SELECT COALESCE(SUM(pg_column_size(t.*)), 0) FROM {ConversationMessage._meta.db_table} t "
         f"JOIN {AgentConversation._meta.db_table} c ON c.id = t.conversation_id WHERE c.workflow_id = %s",
         [workflow.pk]),
    ]  # fmt: skip
    if files_since is not None:
        queries.append(
            (f"SELECT COALESCE(SUM(pg_column_size(t.*)), 0) FROM {StoredFile._meta.db_table} t "
             "WHERE t.owner_id = %s AND t.created_at >= %s", [workflow.owner_id, files_since])
        )  # fmt: skip
    total = 0
    with connection.cursor() as cursor:
        for sql, params in queries:
            cursor.execute(sql, params)
            total += int(cursor.fetchone()[0])
    return total


def growth(before: dict[str, int]) -> dict[str, int]:
    after = table_bytes()
    return {name: after[name] - before.get(name, 0) for name in after}


def storage_objects() -> tuple[int, int]:
    files = [p for p in Path(STORAGE_DIR).rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def multipart(name: str, data: bytes, media_type: str) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
        f"Content-Type: {media_type}\r\n\r\n"
    ).encode()
    return head + data + f"\r\n--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


def conversation_bytes(workflow) -> int:
    return sum(AgentConversation.objects.filter(workflow=workflow).values_list("size_bytes", flat=True))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--distinct", type=int, default=50, help="distinct images; turn i sends image i % distinct")
    parser.add_argument("--concurrency", type=int, default=2, help="worker processes")
    args = parser.parse_args()
    call_command("migrate", verbosity=0)

    owner = get_user_model().objects.create_user(username=f"files-bench-{os.getpid()}-{int(time.time())}")
    token = api_token_create(user=owner, name="bench").raw_key
    client = Client()
    client.force_login(owner)
    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
    plain, with_files = make_workflow(owner), make_workflow(owner)
    images = [png_of_size(IMAGE_BYTES, seed=n) for n in range(args.distinct)]
    port = free_port()
    worker = start(
        [sys.executable, "-m", "celery", "-A", "opencompany", "worker", "-Q", "agent", "-c", str(args.concurrency),
         "--loglevel", "WARNING", "--without-mingle", "--without-gossip", "-n", f"filesbench{os.getpid()}@%h"],
        "files-worker",
    )  # fmt: skip
    web = start([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "opencompany.asgi:application"],
                "files-web")  # fmt: skip
    listeners = []
    load_before = os.getloadavg()[0]
    try:
        wait_port(port)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        auth = {"Authorization": f"Token {token}", "Host": "127.0.0.1"}

        def post(path: str, body: bytes, content_type: str) -> dict:
            conn.request("POST", path, body=body, headers={**auth, "Content-Type": content_type})
            response = conn.getresponse()
            answer = json.loads(response.read())
            if response.status != 201:
                raise RuntimeError(f"{path} refused: {response.status} {answer}")
            return answer

        def turns(workflow, *, attach: bool, count: int) -> list[float]:
            listener = SocketListener(f"ws://127.0.0.1:{port}/ws/workflows/{workflow.pk}/", cookie)
            listeners.append(listener)
            path = f"/api/workflows/{workflow.pk}/chat/messages/"
            waits = []
            for i in range(count):
                started = time.perf_counter()
                body = {"text": f"message {i}: what is in this picture?"}
                if attach:
                    uploaded = post("/api/files/", *multipart(f"shot-{i}.png", images[i % len(images)], "image/png"))
                    body["file_ids"] = [uploaded["id"]]
                run_id = post(path, json.dumps(body).encode(), "application/json")["run"]["id"]
                listener.wait_finished(run_id, timeout=120)
                waits.append((listener.first_delta[run_id] - started) * 1000)
            return waits

        warm = make_workflow(owner)
        turns(warm, attach=True, count=4)  # worker pool processes import and connect on their first tasks
        workflow_delete(workflow=warm)

        compact_tables()
        before = table_bytes()
        plain_waits = turns(plain, attach=False, count=args.turns)
        plain_tables = growth(before)
        compact_tables()
        before = table_bytes()
        files_since = timezone.now()
        file_waits = turns(with_files, attach=True, count=args.turns)
        files_tables = growth(before)
        plain_growth, files_growth = sum(plain_tables.values()), sum(files_tables.values())

        sent = sum(len(images[i % len(images)]) for i in range(args.turns))
        distinct = sum(len(image) for image in images[: min(args.turns, len(images))])
        objects, stored = storage_objects()
        extra = files_growth - plain_growth
        print(f"attachments: {args.turns} turns of each kind, {len(images)} distinct ~{IMAGE_BYTES // 1024} KB PNGs, "
              f"offline provider at zero delay, web (daphne) + worker (concurrency {args.concurrency})")  # fmt: skip
        print(f"  database growth, plain turns:        {plain_growth / 1024:9.1f} KB")
        print(f"  database growth, turns with images:  {files_growth / 1024:9.1f} KB")
        print(f"  what the images added to it:         {extra / 1024:9.1f} KB = {100 * extra / sent:.2f} % of the "
              f"{sent / 1024 / 1024:.1f} MB of images sent (noisy: pages, dead rows)")  # fmt: skip
        plain_rows, files_rows = row_bytes(plain), row_bytes(with_files, files_since=files_since)
        print(f"  bytes of the rows the turns keep:    plain {plain_rows / 1024:.1f} KB, with images "
              f"{files_rows / 1024:.1f} KB: the images added {(files_rows - plain_rows) / 1024:.1f} KB = "
              f"{100 * (files_rows - plain_rows) / sent:.2f} % of the images' bytes (target < 1 %)")  # fmt: skip
        extra_by_table = {name: files_tables[name] - plain_tables.get(name, 0) for name in files_tables}
        largest = sorted(extra_by_table.items(), key=lambda item: -abs(item[1]))[:5]
        print("    by table: " + ", ".join(f"{name} {size / 1024:+.0f} KB" for name, size in largest if size))
        print(f"  stored conversations: plain {conversation_bytes(plain) / 1024:.1f} KB, with images "
              f"{conversation_bytes(with_files) / 1024:.1f} KB")  # fmt: skip
        print(f"  file storage: {objects} objects, {stored / 1024 / 1024:.1f} MB (distinct images: {len(images)}, "
              f"{distinct / 1024 / 1024:.1f} MB; target: one object per distinct image)")  # fmt: skip
        for name, values in (("send -> first delta (plain)", plain_waits), ("upload -> first delta", file_waits)):
            print(f"  {name:<30} p50 {statistics.median(values):6.1f} ms  p95 {percentile(values, 0.95):6.1f} ms")
        print(f"  load average (1 min): {load_before:.2f} before, {os.getloadavg()[0]:.2f} after, "
              f"{os.cpu_count()} CPUs")  # fmt: skip
    finally:
        for listener in listeners:
            listener.close()
        for process in (web, worker):
            process.terminate()
            try:
                process.wait(timeout=20)
            except Exception:
                process.kill()
        for workflow in (plain, with_files):
            workflow_delete(workflow=workflow)
        owner.delete()
        shutil.rmtree(STORAGE_DIR, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
