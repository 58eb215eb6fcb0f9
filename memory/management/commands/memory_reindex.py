"""Rebuild embedding projections for the configured embedder (switching embedder is a reindex, not a migration).

Resumable by construction: items go in id order, batch by batch, and each batch's vectors are stored as soon as
they are made. Without `--all` the work is "items with no current vector", so a rerun after a stop (Ctrl-C, a
crash, a failing embedder) skips what is done. With `--all` the work is "items whose vector was made before the
run started"; a stopped run prints the `--before` that makes the next one continue it instead of starting over.

`--outliers` embeds nothing: it probes every ready vector of the embedder for the outlier mark (memory/outliers.py),
which vectors stored before migration 0007 lack. Probing again writes only changes, so a rerun after a stop is safe.
"""

from __future__ import annotations

import sys
from datetime import datetime

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone
from tqdm import tqdm

from memory import clock
from memory.embedders import get_embedder
from memory.embedders.indexes import ensure_vector_index
from memory.embedding import embed_items
from memory.models import MemoryEmbedding, MemoryItem
from memory.outliers import memory_embeddings_outliers_mark


class Command(BaseCommand):
    help = "Embed memory items that lack a current vector for the configured embedder (MEMORY_EMBEDDER)."

    def add_arguments(self, parser):
        parser.add_argument("--all", action="store_true", help="re-embed every item, not only missing/stale/failed")
        parser.add_argument(
            "--before",
            help="with --all: re-embed only items whose vector was made before this ISO time (a stopped --all run "
            "prints it, so the next run continues it)",
        )
        parser.add_argument("--namespace", type=int, help="only this namespace id")
        parser.add_argument("--batch-size", type=int, default=settings.MEMORY_REINDEX_BATCH_SIZE)
        parser.add_argument("--embedder", help="override MEMORY_EMBEDDER for this run")
        parser.add_argument("--no-progress", action="store_true", help="no progress bar (logs, CI)")
        parser.add_argument(
            "--outliers",
            action="store_true",
            help="embed nothing; mark the outlier vectors among the stored ones (stored before the mark existed)",
        )

    def handle(self, *args, **options):
        embedder = get_embedder(options.get("embedder"))
        if not embedder.enabled:
            raise CommandError(
                "MEMORY_EMBEDDER is 'none': there is nothing to index (full-text search needs no index)."
            )
        if options.get("before") and not options["all"]:
            raise CommandError("--before goes with --all")
        before = _parse_time(options["before"]) if options.get("before") else timezone.now()
        ensure_vector_index(embedder.model, embedder.dims)
        if options["outliers"]:
            return self._mark_outliers(embedder, options)
        items = MemoryItem.objects.filter(Q(expires_at__isnull=True) | Q(expires_at__gt=clock.now()))
        if options.get("namespace"):
            items = items.filter(namespace_id=options["namespace"])
        current = MemoryEmbedding.objects.filter(
            item=OuterRef("pk"),
            model=embedder.model,
            status=MemoryEmbedding.Status.READY,
            item_version=OuterRef("version"),
        )
        if options["all"]:
            # Made by this run (or the stopped run it continues): done.
            current = current.filter(updated_at__gte=before)
        todo = items.filter(~Exists(current))
        counts = {"ready": 0, "failed": 0, "skipped": 0}
        batch = max(1, options["batch_size"])
        bar = _progress(todo.count(), unit="item", desc=embedder.model, options=options)
        last_id = 0
        # --all re-embeds current vectors on purpose: a new billing attempt, the same one when it is continued.
        attempt = f"reindex-all:{before.isoformat()}" if options["all"] else ""
        try:
            while True:
                chunk = list(todo.filter(pk__gt=last_id).order_by("pk").values_list("pk", flat=True)[:batch])
                if not chunk:
                    break
                for state in embed_items(chunk, embedder=embedder, attempt=attempt):
                    counts[state] = counts.get(state, 0) + 1
                last_id = chunk[-1]
                bar.update(len(chunk))
        except KeyboardInterrupt:
            bar.close()
            resume = "manage.py memory_reindex" + (f" --all --before {before.isoformat()}" if options["all"] else "")
            raise CommandError(
                f"stopped after {sum(counts.values())} item(s); what is embedded is kept. Continue with: {resume}"
            ) from None
        bar.close()
        self.stdout.write(
            f"{embedder.model}: {counts['ready']} embedded, {counts['failed']} failed, {counts['skipped']} skipped"
        )
        if counts["failed"]:
            raise CommandError(f"{counts['failed']} item(s) could not be embedded; they stay searchable by text")

    def _mark_outliers(self, embedder, options) -> None:
        vectors = MemoryEmbedding.objects.filter(model=embedder.model, status=MemoryEmbedding.Status.READY)
        if options.get("namespace"):
            vectors = vectors.filter(namespace_id=options["namespace"])
        batch = max(1, options["batch_size"])
        bar = _progress(vectors.count(), unit="vector", desc=f"{embedder.model} outliers", options=options)
        last_id, changed = 0, 0
        while True:
            todo = vectors.filter(item_id__gt=last_id).order_by("item_id")
            chunk = list(todo.values_list("item_id", flat=True)[:batch])
            if not chunk:
                break
            changed += memory_embeddings_outliers_mark(item_ids=chunk, model=embedder.model, dims=embedder.dims)
            last_id = chunk[-1]
            bar.update(len(chunk))
        bar.close()
        marked = vectors.filter(outlier=True).count()
        self.stdout.write(f"{embedder.model}: {marked} outlier vector(s), {changed} mark(s) changed")


def _parse_time(value: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as exc:
        raise CommandError(f"--before is not an ISO time: {value!r}") from exc
    return parsed if parsed.tzinfo else timezone.make_aware(parsed)


def _progress(total: int, *, unit: str, desc: str, options) -> tqdm:
    """A progress bar on stderr (stdout carries the command's result), off with --no-progress."""
    return tqdm(total=total, unit=unit, file=sys.stderr, disable=options["no_progress"], desc=desc, dynamic_ncols=True)
