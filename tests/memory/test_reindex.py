import re

import pytest
from django.core.management import CommandError, call_command

from memory.models import MemoryEmbedding
from tests.memory.embedders import InterruptedConceptEmbedder

pytestmark = pytest.mark.django_db

EMBEDDER = "tests.memory.embedders:InterruptedConceptEmbedder"


@pytest.fixture
def interrupted(settings):
    # Items are written with no embedder, as before a switch of embedder: nothing is embedded yet.
    settings.MEMORY_EMBEDDER = "none"
    InterruptedConceptEmbedder.calls, InterruptedConceptEmbedder.texts = 0, []
    InterruptedConceptEmbedder.interrupt_on = None
    yield InterruptedConceptEmbedder
    InterruptedConceptEmbedder.interrupt_on = None


def _remember(call, count):
    return [
        call({"operation": "remember", "content": f"Note number {n} about tea"})["item"]["id"] for n in range(count)
    ]


def _ready_ids():
    return set(MemoryEmbedding.objects.filter(model="test:concepts", status="ready").values_list("item_id", flat=True))


def test_a_stopped_reindex_keeps_its_batches_and_the_next_run_does_only_the_rest(call, interrupted, capsys):
    ids = _remember(call, 7)
    interrupted.interrupt_on = 3  # batches of 2: two batches done, the third is stopped
    with pytest.raises(CommandError, match="Continue with: manage.py memory_reindex$"):
        call_command("memory_reindex", embedder=EMBEDDER, batch_size=2)
    assert _ready_ids() == set(ids[:4])
    assert "4/7" in capsys.readouterr().err  # tqdm's progress bar, on stderr

    interrupted.interrupt_on, interrupted.texts = None, []
    call_command("memory_reindex", embedder=EMBEDDER, batch_size=2)
    # Only the three items that were not done are embedded again
    assert len(interrupted.texts) == 3 and all(text.endswith("tea") for text in interrupted.texts)
    assert "Note number 4 about tea" in interrupted.texts[0]
    assert _ready_ids() == set(ids)
    assert "3/3" in capsys.readouterr().err


def test_a_stopped_reindex_all_continues_from_the_time_it_prints(call, interrupted):
    ids = _remember(call, 5)
    call_command("memory_reindex", embedder=EMBEDDER)  # every item has a current vector
    assert _ready_ids() == set(ids)

    interrupted.calls, interrupted.texts, interrupted.interrupt_on = 0, [], 2
    with pytest.raises(CommandError) as stopped:
        call_command("memory_reindex", "--all", embedder=EMBEDDER, batch_size=2)
    assert len(interrupted.texts) == 2
    resume = re.search(r"--all --before (\S+)$", str(stopped.value))
    assert resume, str(stopped.value)

    interrupted.calls, interrupted.texts, interrupted.interrupt_on = 0, [], None
    call_command("memory_reindex", "--all", "--before", resume.group(1), embedder=EMBEDDER, batch_size=2)
    # The two re-embedded by the stopped run are not redone; the three others are
    assert sorted(interrupted.texts) == sorted(f"Note number {n} about tea" for n in range(2, 5))

    # A fresh --all redoes everything
    interrupted.texts = []
    call_command("memory_reindex", "--all", embedder=EMBEDDER, batch_size=2)
    assert len(interrupted.texts) == 5


def test_before_needs_all(interrupted):
    with pytest.raises(CommandError, match="--before goes with --all"):
        call_command("memory_reindex", "--before", "2026-01-01T00:00:00+00:00", embedder=EMBEDDER)


def test_reindex_outliers_marks_the_vectors_stored_before_the_mark_existed(call, interrupted, capsys):
    ids = _remember(call, 3)
    call_command("memory_reindex", embedder=EMBEDDER)
    # As after migration 0007: vectors stored, none marked. The concept embedder gives all three notes one vector
    # (they are all about tea), so none is an outlier; a lone vector of another direction is.
    assert MemoryEmbedding.objects.filter(outlier=True).count() == 0
    lone = call({"operation": "remember", "content": "The printer is on the third floor"})["item"]["id"]
    MemoryEmbedding.objects.create(
        item_id=lone,
        namespace_id=MemoryEmbedding.objects.get(item_id=ids[0]).namespace_id,
        model="test:concepts",
        dims=MemoryEmbedding.objects.get(item_id=ids[0]).dims,
        embedding=[0.0] * (MemoryEmbedding.objects.get(item_id=ids[0]).dims - 1) + [1.0],
        item_version=1,
        status="ready",
    )
    call_command("memory_reindex", embedder=EMBEDDER, outliers=True, batch_size=2)
    marked = set(MemoryEmbedding.objects.filter(outlier=True).values_list("item_id", flat=True))
    assert marked == {lone}
    assert "1 outlier vector(s), 1 mark(s) changed" in capsys.readouterr().out
