"""Rebuild embedding projections for the configured embedder (switching embedder is a reindex, not a migration)."""

from __future__ import annotations

import sys
import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db.models import Exists, OuterRef, Q

from memory import clock
from memory.embedders import get_embedder
from memory.embedders.indexes import ensure_vector_index
from memory.embedding import embed_items
from memory.models import MemoryEmbedding, MemoryItem


def _progress(done: int, total: int, started: float, stream) -> None:
    width = 30
    filled = int(width * done / total) if total else width
    rate = done / max(time.monotonic() - started, 1e-6)
    stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} items, {rate:.0f}/s")
    stream.flush()


class Command(BaseCommand):
    help = "Embed memory items that lack a current vector for the configured embedder (MEMORY_EMBEDDER)."

    def add_arguments(self, parser):
        parser.add_argument("--all", action="store_true", help="re-embed every item, not only missing/stale/failed")
        parser.add_argument("--namespace", type=int, help="only this namespace id")
        parser.add_argument("--batch-size", type=int, default=settings.MEMORY_REINDEX_BATCH_SIZE)
        parser.add_argument("--embedder", help="override MEMORY_EMBEDDER for this run")

    def handle(self, *args, **options):
        embedder = get_embedder(options.get("embedder"))
        if not embedder.enabled:
            raise CommandError(
                "MEMORY_EMBEDDER is 'none': there is nothing to index (full-text search needs no index)."
            )
        ensure_vector_index(embedder.model, embedder.dims)
        now = clock.now()
        items = MemoryItem.objects.filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
        if options.get("namespace"):
            items = items.filter(namespace_id=options["namespace"])
        if not options["all"]:
            current = MemoryEmbedding.objects.filter(
                item=OuterRef("pk"),
                model=embedder.model,
                status=MemoryEmbedding.Status.READY,
                item_version=OuterRef("version"),
            )
            items = items.filter(~Exists(current))
        ids = list(items.order_by("pk").values_list("pk", flat=True))
        total, done, counts = len(ids), 0, {"ready": 0, "failed": 0, "skipped": 0}
        stream = sys.stderr
        started = time.monotonic()
        _progress(0, total, started, stream)
        batch = max(1, options["batch_size"])
        for start in range(0, total, batch):
            chunk = ids[start : start + batch]
            for state in embed_items(chunk, embedder=embedder):
                counts[state] = counts.get(state, 0) + 1
            done += len(chunk)
            _progress(done, total, started, stream)
        stream.write("\n")
        self.stdout.write(
            f"{embedder.model}: {counts['ready']} embedded, {counts['failed']} failed, {counts['skipped']} skipped"
        )
        if counts["failed"]:
            raise CommandError(f"{counts['failed']} item(s) could not be embedded; they stay searchable by text")
