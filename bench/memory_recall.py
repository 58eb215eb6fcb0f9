#!/usr/bin/env python
"""Memory recall benchmark: remember and recall latency at 10,000 and 100,000 items in one namespace.

    OPENCOMPANY_DATA_DIR=/tmp/oc-bench .venv/bin/python bench/memory_recall.py [--sizes 10000,100000] [--keep]

It creates its own database on the (embedded) PostgreSQL, plants the labelled items of
bench/data/memory_recall_queries.json in the benchmark namespace, fills it (and 10 namespaces beside it) with
generated items through COPY, and prints:

- remember p50/p95: `memory_item_remember` (the service the tool calls) with no embedder, so without embedding;
- recall p50/p95, FTS-only and hybrid: `memory_items_recall`, limit 10, over the labelled queries plus generated
  keyword queries; the query's embedding time is measured and reported apart (hybrid runs with the query vectors
  computed beforehand);
- recall@5 of the labelled queries, FTS-only and hybrid, split by keyword and paraphrase queries.

Vectors come from the default embedder (`minilm`: all-MiniLM-L6-v2 int8 on ONNX Runtime, installed with the
project); `--embedder local` uses the full-precision torch model of the `local-embedder` extra, `--embedder hash` a
deterministic random projection (hybrid recall@5 is then not meaningful). On a CPU an embedder does a few hundred
texts per second, so generated items are built from a pool of distinct sentences that is embedded once; an item's
vector is the normalised sum of its two sentences' vectors (its unique suffix - a date and a ticket number - is not
embedded). The planted items and the queries are embedded one by one. After the COPY and the index build, every
vector goes through the embedding task's outlier probe (memory/outliers.py), and the outlier index is built.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "opencompany.settings.base")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# Figures are for the production setting: DEBUG keeps every query's SQL in memory and costs time per statement
# (a hybrid recall's statement carries a 384-number vector literal).
os.environ.setdefault("DEBUG", "0")
if not os.environ.get("SECRET_KEY"):  # production settings need one; this run's rows are its own
    import secrets

    os.environ["SECRET_KEY"] = secrets.token_urlsafe(48)

import django  # noqa: E402
from figures import percentile  # noqa: E402  (bench/, the script's own folder)

django.setup()

from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection  # noqa: E402
from django.utils import timezone  # noqa: E402

from memory import selectors  # noqa: E402
from memory.embedders import Embedder, embedding_text, get_embedder  # noqa: E402
from memory.embedders import indexes as indexes_module  # noqa: E402
from memory.embedders.indexes import index_name, outlier_index_name, vector_cast, vector_index_sql  # noqa: E402
from memory.embedders.local import LocalMiniLMEmbedder  # noqa: E402
from memory.models import MemoryNamespace  # noqa: E402
from memory.outliers import memory_embeddings_outliers_mark  # noqa: E402
from memory.services import memory_item_remember, memory_namespace_get_or_create  # noqa: E402
from workflows.models import Workflow  # noqa: E402

DATA = ROOT / "bench" / "data" / "memory_recall_queries.json"
# A query matching at least this many items is "broad" in the split of the full-text figures.
BROAD_MATCHES = 2_000
SIDE_NAMESPACES = 10
SIDE_ITEMS = 3_000

COMPANIES = [
    "Acme",
    "Globex",
    "Initech",
    "Umbrella",
    "Hooli",
    "Stark",
    "Wayne",
    "Soylent",
    "Tyrell",
    "Cyberdyne",
    "Vandelay",
    "Wonka",
    "Oscorp",
    "Massive Dynamic",
    "Pied Piper",
    "Aperture",
    "Gringotts",
    "Monarch",
    "Nakatomi",
    "Oceanic",
    "Dunder Mifflin",
    "Sterling Cooper",
    "Prestige",
    "Blue Sun",
    "Virtucon",
]
PEOPLE = [
    "Dana",
    "Priya",
    "Marco",
    "Lena",
    "Ravi",
    "Mia",
    "Tom",
    "Aisha",
    "Jonas",
    "Sofia",
    "Kenji",
    "Ines",
    "Omar",
    "Hannah",
    "Luis",
    "Chloe",
    "Noah",
    "Elif",
    "Mateo",
    "Yara",
    "Felix",
    "Grace",
    "Ivan",
    "Zoe",
    "Sam",
    "Nora",
]
TEAMS = ["platform", "billing", "support", "growth", "data", "security", "design", "mobile", "sales", "finance"]
THINGS = [
    "invoice",
    "contract",
    "dashboard",
    "release",
    "migration",
    "roadmap",
    "budget",
    "onboarding",
    "API key",
    "report",
    "renewal",
    "demo",
    "workshop",
    "audit",
    "incident review",
    "price list",
    "offsite",
    "backlog",
]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
TEMPLATES = [
    "{person} from {company} asked for the {thing} to be ready by {day}.",
    "The {team} team owns the {thing} for {company} this quarter.",
    "{company} reported a problem with the {thing}; {person} is following up.",
    "Agreed with {person} that the {team} team reviews every {thing} before it ships.",
    "{person} prefers to discuss the {thing} in the {day} sync rather than by email.",
    "{company} wants a discount on the {thing} if they sign before {day}.",
    "Reminder: the {thing} for {company} needs sign-off from {person}.",
    "{person} joined the {team} team and will take over the {thing}.",
    "The {thing} meeting with {company} moved to {day} afternoon.",
    "{company} escalated the {thing} to {person}; the {team} team is on it.",
    "{person} thinks the {thing} should be simplified before {company} sees it.",
    "Budget for the {team} {thing} was approved by {person}.",
    "{company} uses our {thing} daily; {person} is their main contact.",
    "Decision: the {team} team pauses work on the {thing} until {company} replies.",
    "{person} is out on {day}; the {thing} for {company} waits until then.",
    "Invoice for the {company} {thing} was sent to {person} on {day}.",
    "{company} deploys the {thing} on {day} mornings, coordinated by {person}.",
    "The {team} team measured the {thing} latency for {company}; {person} has the numbers.",
]
KEYWORD_QUERIES = [
    "{company} {thing}",
    "{person} {thing}",
    "{team} team {thing}",
    "{company} {person}",
    "{thing} {day}",
    "{company} discount",
    "{person} out",
    "{team} budget approved",
]


def fill(rng: random.Random, template: str) -> str:
    return template.format(
        company=rng.choice(COMPANIES),
        person=rng.choice(PEOPLE),
        team=rng.choice(TEAMS),
        thing=rng.choice(THINGS),
        day=rng.choice(DAYS),
    )


class HashEmbedder(Embedder):
    """Stand-in when the local model is missing: a fixed random projection of word hashes (no semantics)."""

    name = "bench-hash"
    model = "bench:hash-384"
    dims = 384

    def embed(self, texts):
        out = []
        for text in texts:
            vector = [0.0] * self.dims
            for word in text.lower().split():
                seeded = random.Random(hash(word) & 0xFFFFFFFF)
                for _ in range(4):
                    vector[seeded.randrange(self.dims)] += seeded.choice((-1.0, 1.0))
            norm = sum(x * x for x in vector) ** 0.5 or 1.0
            out.append([x / norm for x in vector])
        return out


class PrecomputedQueryEmbedder(Embedder):
    """Answers recall's query embedding from vectors computed beforehand, so the timing is the database's."""

    def __init__(self, base: Embedder, vectors: dict[str, list[float]]):
        self.name, self.model, self.dims, self.vectors = base.name, base.model, base.dims, vectors

    def embed(self, texts):
        return [self.vectors[text] for text in texts]


class NoEmbedder(Embedder):
    name, model, dims, enabled = "none", "", 0, False


def vector_text(vector) -> str:
    return "[" + ",".join(f"{x:.6f}" for x in vector) + "]"


def copy_items(namespace_id: int, rows: list[tuple[str, str, list[str], str]], vectors, model: str, start_id: int):
    """COPY items with explicit ids, and their ready projections, in two COPY streams."""
    now = timezone.now()
    with connection.cursor() as cursor:
        raw = cursor.cursor
        with raw.copy(
            "COPY memory_memoryitem (id, namespace_id, content, title, category, tags, version, created_at, "
            "updated_at) FROM STDIN"
        ) as copy:
            for offset, (content, title, tags, category) in enumerate(rows):
                copy.write_row((start_id + offset, namespace_id, content, title, category, tags, 1, now, now))
        if vectors is not None:
            with raw.copy(
                "COPY memory_memoryembedding (item_id, namespace_id, model, dims, embedding, item_version, status, "
                "error, updated_at) FROM STDIN"
            ) as copy:
                for offset, vector in enumerate(vectors):
                    copy.write_row((start_id + offset, namespace_id, model, len(vector), vector, 1, "ready", "", now))
        cursor.execute(
            "UPDATE memory_memorynamespace SET item_count = item_count + %s WHERE id = %s", [len(rows), namespace_id]
        )


def drop_vector_index(embedder: Embedder) -> None:
    # Maintaining HNSW row by row during COPY is far slower than one build afterwards.
    with connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX IF EXISTS {index_name(embedder.model, embedder.dims)}")
        cursor.execute(f"DROP INDEX IF EXISTS {outlier_index_name(embedder.model, embedder.dims)}")
    indexes_module._ensured.discard((embedder.model, embedder.dims))


def build_vector_index(embedder: Embedder) -> float:
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("SET maintenance_work_mem = '1GB'")
        cursor.execute("SET max_parallel_maintenance_workers = 2")
        cursor.execute(vector_index_sql(embedder.model, embedder.dims, concurrently=False))
    return time.perf_counter() - started


def mark_outliers(embedder: Embedder) -> tuple[float, int, int]:
    """What the embedding task does after storing each vector (memory/outliers.py), for the COPYed ones: the same
    function, in batches, then the outlier index built once. One difference: the task probes the vectors stored
    before the item, this probes all of them (the rule only marks fewer when more vectors exist)."""
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("SELECT item_id FROM memory_memoryembedding WHERE model = %s ORDER BY item_id", [embedder.model])
        item_ids = [row[0] for row in cursor.fetchall()]
    for start in range(0, len(item_ids), 2_000):
        batch = item_ids[start : start + 2_000]
        memory_embeddings_outliers_mark(item_ids=batch, model=embedder.model, dims=embedder.dims)
        print(f"\r  outlier probe {start + len(batch)}/{len(item_ids)}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    with connection.cursor() as cursor:
        cursor.execute(vector_index_sql(embedder.model, embedder.dims, concurrently=False, outliers=True))
        cursor.execute("SELECT count(*) FROM memory_memoryembedding WHERE model = %s AND outlier", [embedder.model])
        marked = cursor.fetchone()[0]
    return time.perf_counter() - started, marked, len(item_ids)


def next_id() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT coalesce(max(id), 0) + 1 FROM memory_memoryitem")
        return cursor.fetchone()[0]


def reset_sequence() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT setval(pg_get_serial_sequence('memory_memoryitem', 'id'), (SELECT max(id) FROM memory_memoryitem))"
        )


class Corpus:
    """Generated items: two sentences from a pool embedded once; an item's vector is the normalised sum of its
    sentences' vectors (mean pooling makes that close to embedding the pair), so no two items share a vector."""

    def __init__(self, rng: random.Random, embedder: Embedder, pool_size: int):
        self.rng = rng
        started = time.perf_counter()
        sentences = set()
        while len(sentences) < pool_size:
            sentences.add(fill(rng, rng.choice(TEMPLATES)))
        self.pool = sorted(sentences)
        self.vectors = cached_embeddings(embedder, self.pool)
        self.embed_seconds = time.perf_counter() - started

    def rows(self, count: int, serial_start: int):
        rows, vectors = [], []
        for n in range(count):
            a, b = self.rng.randrange(len(self.pool)), self.rng.randrange(len(self.pool))
            ticket = f"{self.rng.choice(['OPS', 'FIN', 'SUP', 'ENG'])}-{serial_start + n}"
            content = f"{self.pool[a]} {self.pool[b]} Noted {2024 + n % 3}-{1 + n % 12:02d}-{1 + n % 28:02d}, {ticket}."
            tags = self.rng.sample(TEAMS, k=self.rng.randint(0, 2))
            rows.append((content, "", tags, self.rng.choice(["fact", "decision", "preference", "person", "customer"])))
            mixed = [x + y for x, y in zip(self.vectors[a], self.vectors[b], strict=True)]
            norm = sum(x * x for x in mixed) ** 0.5 or 1.0
            vectors.append(vector_text([x / norm for x in mixed]))
        return rows, vectors


def cached_embeddings(embedder: Embedder, texts: list[str]) -> list[list[float]]:
    """Embed once per (model, texts): a CPU embeds only tens of sentences per second."""
    import hashlib

    digest = hashlib.sha256(json.dumps([embedder.model, texts]).encode()).hexdigest()[:16]
    path = Path(settings.DATA_DIR) / f"bench-embeddings-{digest}.json"
    if path.exists():
        return json.loads(path.read_text())
    vectors = embed_in_batches(embedder, texts)
    path.write_text(json.dumps(vectors))
    return vectors


def embed_in_batches(embedder: Embedder, texts: list[str], batch: int = 256) -> list[list[float]]:
    out = []
    for start in range(0, len(texts), batch):
        out += embedder.embed(texts[start : start + batch])
        print(f"\r  embedded {min(start + batch, len(texts))}/{len(texts)}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return out


def timed(fn, repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def measure(
    label, namespace, labelled, query_vectors, embedder, keyword_queries, remember_n, recall_rounds, out, ef_sweep
):
    # remember: the service with no embedder (no projection row, no task), into the benchmark namespace
    selectors.get_embedder = lambda name=None: NoEmbedder()
    import memory.services.announce as announce_module
    import memory.services.embeddings as embeddings_module

    embeddings_module.get_embedder = lambda name=None: NoEmbedder()
    counter = iter(range(10**9))

    def remember_once():
        memory_item_remember(
            namespace=namespace,
            content=f"Bench note {next(counter)}: {fill(random, TEMPLATES[0])}",
            tags=["bench"],
            actor="bench",
            idempotency_key=f"bench-{label}-{next(counter)}",
        )

    timed(remember_once, 20)
    with_broadcast_ms = timed(remember_once, remember_n)
    # The on-commit `memory.updated` broadcast (core.realtime) runs in the caller's thread after the commit;
    # measured apart so the figure is memory's own write.
    real_publish = announce_module.publish_memory_updated
    announce_module.publish_memory_updated = lambda **kwargs: None
    try:
        remember_ms = timed(remember_once, remember_n)
    finally:
        announce_module.publish_memory_updated = real_publish

    # The floor under any durable write here: one single-row INSERT committed (WAL flush) on the same server.
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE IF NOT EXISTS bench_commit_floor (x int)")

    def commit_once():
        with connection.cursor() as cursor:
            cursor.execute("INSERT INTO bench_commit_floor VALUES (1)")

    floor_ms = timed(commit_once, remember_n)

    queries = [q["query"] for q in labelled["queries"]] + keyword_queries

    def recall_all(query_list=None):
        samples = []
        for query in query_list or queries:
            started = time.perf_counter()
            selectors.memory_items_recall(namespace=namespace, query=query, limit=10)
            samples.append((time.perf_counter() - started) * 1000)
        return samples

    # How many items each query matches (websearch AND semantics), to split the full-text figures by breadth.
    with connection.cursor() as cursor:
        breadth = {}
        for query in queries:
            cursor.execute(
                "SELECT count(*) FROM memory_memoryitem WHERE namespace_id = %s "
                "AND search_vector @@ websearch_to_tsquery('english', %s)",
                [namespace.pk, query],
            )
            breadth[query] = cursor.fetchone()[0]
    broad_queries = [q for q in queries if breadth[q] >= BROAD_MATCHES]
    narrow_queries = [q for q in queries if 0 < breadth[q] < BROAD_MATCHES]

    recall_all()  # warm
    fts_ms = [s for _ in range(recall_rounds) for s in recall_all()]
    fts_broad_ms = [s for _ in range(recall_rounds) for s in recall_all(broad_queries)] if broad_queries else [0.0]
    fts_narrow_ms = [s for _ in range(recall_rounds) for s in recall_all(narrow_queries)] if narrow_queries else [0.0]
    fts_hits = recall_at_5(namespace, labelled)

    selectors.get_embedder = lambda name=None: PrecomputedQueryEmbedder(embedder, query_vectors)
    recall_all()
    modes = set()
    for query in queries[:3]:
        modes.add(selectors.memory_items_recall(namespace=namespace, query=query, limit=10)["search"])
    hybrid_ms = [s for _ in range(recall_rounds) for s in recall_all()]
    hybrid_hits = recall_at_5(namespace, labelled)
    # The HNSW walk's width trades latency for finding the paraphrases among near-duplicates.
    default_ef = settings.MEMORY_RECALL_HNSW_EF_SEARCH
    sweep = []
    for ef in ef_sweep:
        settings.MEMORY_RECALL_HNSW_EF_SEARCH = ef
        recall_all()
        samples = [s for _ in range(recall_rounds) for s in recall_all()]
        sweep.append((ef, percentile(samples, 0.5), percentile(samples, 0.95), recall_at_5(namespace, labelled)))
    settings.MEMORY_RECALL_HNSW_EF_SEARCH = default_ef
    out.append(
        {
            "label": label,
            "items": namespace.items.count(),
            "remember": (percentile(remember_ms, 0.5), percentile(remember_ms, 0.95), len(remember_ms)),
            "floor": (percentile(floor_ms, 0.5), percentile(floor_ms, 0.95)),
            "with_broadcast": (percentile(with_broadcast_ms, 0.5), percentile(with_broadcast_ms, 0.95)),
            "fts": (percentile(fts_ms, 0.5), percentile(fts_ms, 0.95), len(fts_ms)),
            "fts_broad": (percentile(fts_broad_ms, 0.5), percentile(fts_broad_ms, 0.95), len(broad_queries)),
            "fts_narrow": (percentile(fts_narrow_ms, 0.5), percentile(fts_narrow_ms, 0.95), len(narrow_queries)),
            "max_matches": max(breadth.values()),
            "ef_sweep": sweep,
            "hybrid": (percentile(hybrid_ms, 0.5), percentile(hybrid_ms, 0.95), len(hybrid_ms)),
            "hybrid_modes": sorted(modes),
            "recall_at_5": {"fts": fts_hits, "hybrid": hybrid_hits},
        }
    )


def recall_at_5(namespace, labelled) -> dict:
    key_by_id = labelled["ids"]
    hits = {"keyword": [0, 0], "paraphrase": [0, 0]}
    for query in labelled["queries"]:
        result = selectors.memory_items_recall(namespace=namespace, query=query["query"], limit=5)
        top = {key_by_id.get(item["id"]) for item in result["items"]}
        hits[query["kind"]][1] += 1
        if set(query["relevant"]) & top:
            hits[query["kind"]][0] += 1
    return hits


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--pool", type=int, default=3000, help="distinct generated sentences to embed")
    parser.add_argument("--remember", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3, help="passes over the query set per mode")
    parser.add_argument("--embedder", choices=["default", "local", "hash"], default="default")
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database")
    parser.add_argument(
        "--ef-sweep", default="", help="hybrid again at these hnsw.ef_search values, e.g. 40,100,200 (comma-separated)"
    )
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))

    settings.MEMORY_ITEMS_PER_NAMESPACE_MAX = 10 * max(sizes)
    embedders = {"default": lambda: get_embedder("minilm"), "local": LocalMiniLMEmbedder, "hash": HashEmbedder}
    embedder: Embedder = embedders[args.embedder]()

    old_name = connection.settings_dict["NAME"]
    bench_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
    print(
        f"database {bench_name} on {connection.settings_dict['HOST']}:{connection.settings_dict['PORT']}, "
        f"embedder {embedder.model}",
        file=sys.stderr,
    )
    try:
        return run(args, sizes, embedder)
    finally:
        if not args.keep:
            connection.creation.destroy_test_db(old_name, verbosity=0)


def run(args, sizes, embedder) -> int:
    rng = random.Random(20261202)
    user = get_user_model().objects.create_user("bench-owner", password="bench-password-1")
    workflow = Workflow.objects.create(owner=user, name="bench")
    namespace = memory_namespace_get_or_create(owner=user, workflow=workflow, node_id=f"{workflow.pk}:simpleMemory:1")
    vector_cast(embedder.dims)
    drop_vector_index(embedder)

    labelled = json.loads(DATA.read_text())
    print("embedding the labelled items, the queries and the sentence pool", file=sys.stderr)
    started = time.perf_counter()
    planted_vectors = embed_in_batches(
        embedder, [embedding_text(title="", content=i["content"]) for i in labelled["items"]], batch=64
    )
    planted_ms = (time.perf_counter() - started) * 1000 / len(labelled["items"])
    keyword_queries = [fill(rng, rng.choice(KEYWORD_QUERIES)) for _ in range(60)]
    all_queries = [q["query"] for q in labelled["queries"]] + keyword_queries
    query_embed_ms = []
    query_vectors = {}
    for query in all_queries:
        begun = time.perf_counter()
        query_vectors[query] = embedder.embed([query])[0]
        query_embed_ms.append((time.perf_counter() - begun) * 1000)
    corpus = Corpus(rng, embedder, args.pool)

    # The labelled items are planted at random places among the first items, as memories arrive over time;
    # recall@5 looks them up by id.
    planted = [
        ((item["content"], "", item["tags"], item["category"]), vector_text(vector), item["key"])
        for item, vector in zip(labelled["items"], planted_vectors, strict=True)
    ]
    labelled["ids"] = {}

    print(f"filling {SIDE_NAMESPACES} namespaces beside it with {SIDE_ITEMS} items each", file=sys.stderr)
    for n in range(SIDE_NAMESPACES):
        side_workflow = Workflow.objects.create(owner=user, name=f"side {n}")
        side = memory_namespace_get_or_create(owner=user, workflow=side_workflow, node_id=f"{side_workflow.pk}:m:1")
        rows, vectors = corpus.rows(SIDE_ITEMS, 10**6 * (n + 1))
        copy_items(side.pk, rows, vectors, embedder.model, next_id())

    results = []
    for size in sizes:
        have = MemoryNamespace.objects.get(pk=namespace.pk).items.count()
        missing = size - have
        started = time.perf_counter()
        drop_vector_index(embedder)
        while missing > 0:
            chunk = min(missing, 20_000)
            rows, vectors = corpus.rows(chunk - len(planted), have)
            first_id = next_id()
            for row, vector, _key in planted:
                position = rng.randrange(len(rows) + 1)
                rows.insert(position, row)
                vectors.insert(position, vector)
            for position, row in enumerate(rows):
                for planted_row, _, key in planted:
                    if row is planted_row:
                        labelled["ids"][first_id + position] = key
            planted = []
            copy_items(namespace.pk, rows, vectors, embedder.model, first_id)
            have += chunk
            missing -= chunk
        reset_sequence()
        drop_vector_index(embedder)
        build_seconds = build_vector_index(embedder)
        print(f"HNSW index built in {build_seconds:.1f}s", file=sys.stderr)
        mark_seconds, marked, probed = mark_outliers(embedder)
        outliers = (marked, probed, mark_seconds)
        print(f"{marked} of {probed} vectors are outliers (probed in {mark_seconds:.1f}s)", file=sys.stderr)
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE memory_memoryitem")
            cursor.execute("VACUUM ANALYZE memory_memoryembedding")
        print(f"namespace filled to {have} items in {time.perf_counter() - started:.1f}s; measuring", file=sys.stderr)
        namespace.refresh_from_db()
        measure(
            f"{size:,}",
            namespace,
            labelled,
            query_vectors,
            embedder,
            keyword_queries,
            args.remember,
            args.rounds,
            results,
            [int(ef) for ef in args.ef_sweep.split(",") if ef],
        )
        results[-1]["outliers"] = outliers

    report(results, embedder, corpus, planted_ms, query_embed_ms, len(all_queries))
    return 0


def report(results, embedder, corpus, planted_ms, query_embed_ms, n_queries):
    print()
    print(
        f"memory recall benchmark - PostgreSQL {connection.cursor().connection.info.server_version}, "
        f"embedder {embedder.model} ({embedder.dims} dims), {SIDE_NAMESPACES} namespaces of {SIDE_ITEMS:,} beside"
    )
    print(f"queries: {n_queries} per pass (60 labelled + 60 generated keyword queries), limit 10")
    header = (
        f"{'items':>9} | {'remember p50/p95 ms':>20} | {'recall FTS p50/p95 ms':>22} | {'recall hybrid p50/p95 ms':>25}"
    )
    print(header)
    print("-" * len(header))
    for row in results:
        r, f, h = row["remember"], row["fts"], row["hybrid"]
        print(
            f"{row['items']:>9,} | {r[0]:>9.2f} / {r[1]:<8.2f} | {f[0]:>10.2f} / {f[1]:<9.2f} | "
            f"{h[0]:>11.2f} / {h[1]:<9.2f}"
        )
    print()
    for row in results:
        print(
            f"  at {row['label']} items: a bare one-row INSERT + COMMIT takes p50 {row['floor'][0]:.2f} / "
            f"p95 {row['floor'][1]:.2f} ms on this server (the fsync floor under every remember); remember with "
            f"the on-commit broadcast to Redis: p50 {row['with_broadcast'][0]:.2f} / "
            f"p95 {row['with_broadcast'][1]:.2f} ms"
        )
    for row in results:
        fb, fn = row["fts_broad"], row["fts_narrow"]
        print(
            f"  at {row['label']} items, full text: broad queries (>= {BROAD_MATCHES:,} matches, {fb[2]} of them, "
            f"up to {row['max_matches']:,}) p50 {fb[0]:.2f} / p95 {fb[1]:.2f} ms; narrower ones ({fn[2]}) "
            f"p50 {fn[0]:.2f} / p95 {fn[1]:.2f} ms"
        )
    for row in results:
        marked, probed, seconds = row["outliers"]
        print(
            f"  at {row['label']} items: {marked:,} of {probed:,} vectors are outliers (no other within "
            f"{settings.MEMORY_VECTOR_OUTLIER_DISTANCE}), marked by memory/outliers.py in {seconds:.0f}s "
            f"({seconds * 1000 / max(probed, 1):.2f} ms a vector)"
        )
    print(f"  load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print()
    print("recall@5 of the labelled queries (hits/queries):")
    for row in results:
        parts = []
        for mode in ("fts", "hybrid"):
            hits = row["recall_at_5"][mode]
            total = hits["keyword"][0] + hits["paraphrase"][0]
            count = hits["keyword"][1] + hits["paraphrase"][1]
            parts.append(
                f"{mode}: {total}/{count} = {total / count:.2f} (keyword {hits['keyword'][0]}/"
                f"{hits['keyword'][1]}, paraphrase {hits['paraphrase'][0]}/{hits['paraphrase'][1]})"
            )
        print(f"  {row['label']:>9} items  " + "; ".join(parts) + f"; hybrid ran as {row['hybrid_modes']}")
    for row in results:
        for ef, p50, p95, hits in row["ef_sweep"]:
            print(
                f"  hybrid at {row['label']} items with hnsw.ef_search {ef}: p50 {p50:.2f} / p95 {p95:.2f} ms, "
                f"recall@5 keyword {hits['keyword'][0]}/{hits['keyword'][1]}, "
                f"paraphrase {hits['paraphrase'][0]}/{hits['paraphrase'][1]}"
            )
    print()
    print(
        f"query embedding (reported apart, not in the hybrid figures): p50 {percentile(query_embed_ms, 0.5):.1f} ms, "
        f"p95 {percentile(query_embed_ms, 0.95):.1f} ms per query; item embedding {planted_ms:.1f} ms per item; "
        f"sentence pool of {len(corpus.pool):,} embedded in {corpus.embed_seconds:.0f}s"
    )
    if embedder.model.startswith("bench:"):
        print("NOTE: the local model is not installed: vectors are random projections, hybrid recall@5 means nothing.")
    print(
        f"settings: MEMORY_RECALL_HNSW_EF_SEARCH {settings.MEMORY_RECALL_HNSW_EF_SEARCH}, "
        f"MEMORY_RECALL_VECTOR_CANDIDATES {settings.MEMORY_RECALL_VECTOR_CANDIDATES}, "
        f"MEMORY_RECALL_OUTLIER_CANDIDATES {settings.MEMORY_RECALL_OUTLIER_CANDIDATES}, "
        f"MEMORY_VECTOR_OUTLIER_DISTANCE {settings.MEMORY_VECTOR_OUTLIER_DISTANCE}, "
        f"MEMORY_RECALL_FTS_WINDOW {settings.MEMORY_RECALL_FTS_WINDOW}, "
        f"MEMORY_RECALL_FTS_BROAD_MATCHES {settings.MEMORY_RECALL_FTS_BROAD_MATCHES}"
    )
    final = next((row for row in results if row["items"] >= 100_000), None)
    if final is None:
        print("targets are for 100,000 items: run with --sizes 100000 for the verdicts")
        return
    hits = final["recall_at_5"]["hybrid"]["paraphrase"][0]
    verdicts = [
        ("remember p95 <= 3 ms", final["remember"][1] <= 3.0, f"{final['remember'][1]:.2f} ms"),
        ("recall p95 <= 4 ms full-text", final["fts"][1] <= 4.0, f"{final['fts'][1]:.2f} ms"),
        ("recall p95 <= 8 ms hybrid", final["hybrid"][1] <= 8.0, f"{final['hybrid'][1]:.2f} ms"),
        ("hybrid recall@5 on paraphrases >= 20 of 30", hits >= 20, f"{hits} of 30"),
    ]
    print(f"targets at {final['label']} items (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs):")
    for name, met, figure in verdicts:
        print(f"  {'MET   ' if met else 'MISSED'} {name}: {figure}")


if __name__ == "__main__":
    raise SystemExit(main())
