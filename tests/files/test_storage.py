"""Bytes once per SHA-256, caps and quota refused before anything is stored, and the orphan sweep."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from django.utils import timezone

from chat.models import ChatMessage
from chat.services.clearing import chat_clear
from chat.services.runs import chat_message_send
from conversations.services import conversation_context_clear
from files.models import StoredFile
from files.services import file_upload, files_for_message, files_sweep_orphans
from files.sniffing import FileRefused
from files.storage import bytes_put, file_bytes_read
from providers.files import FileUnavailable, read_file_bytes
from tests.chat.helpers import chat_workflow, stored
from tests.files.helpers import stored_objects
from tests.files.samples import pdf, png
from workflows.services import workflow_delete

pytestmark = pytest.mark.django_db(transaction=True)


def later(seconds: int):
    return timezone.now() + timedelta(seconds=seconds)


def test_the_same_bytes_are_stored_once_whoever_uploads_them(owner, other_owner, file_storage_dir):
    image = png(8, 8)
    first = file_upload(owner=owner, name="a.png", data=image)
    again = file_upload(owner=owner, name="b.png", data=image)
    theirs = file_upload(owner=other_owner, name="c.png", data=image)
    assert first.sha256 == again.sha256 == theirs.sha256 == hashlib.sha256(image).hexdigest()
    assert StoredFile.objects.count() == 3  # a row per upload, for each owner's own name
    assert stored_objects(file_storage_dir) == [first.sha256]  # the bytes once
    # Adapters read them through the reader this app registered (providers/files.py), checked against the hash.
    assert read_file_bytes(first.sha256) == image


def test_a_file_over_the_cap_is_refused_before_anything_is_stored(owner, settings, file_storage_dir):
    settings.FILE_MAX_BYTES = 2000
    with pytest.raises(FileRefused) as refused:
        file_upload(owner=owner, name="big.png", data=png(40, 40))
    assert refused.value.code == "file_too_large" and refused.value.status == 413
    assert "big.png" in refused.value.message and "at most 2 KB" in refused.value.message
    assert not StoredFile.objects.exists() and stored_objects(file_storage_dir) == []


def test_the_owner_quota_counts_each_distinct_file_once(owner, other_owner, settings, file_storage_dir):
    one, two = png(20, 20, seed=1), png(20, 20, seed=2)
    settings.FILE_OWNER_QUOTA_BYTES = len(one) + len(two) - 1
    file_upload(owner=owner, name="one.png", data=one)
    file_upload(owner=owner, name="one again.png", data=one)  # the same bytes take no more room
    with pytest.raises(FileRefused) as refused:
        file_upload(owner=owner, name="two.png", data=two)
    assert refused.value.code == "file_quota_exceeded" and "two.png" in refused.value.message
    assert sorted(StoredFile.objects.filter(owner=owner).values_list("name", flat=True)) == ["one again.png", "one.png"]
    assert stored_objects(file_storage_dir) == [hashlib.sha256(one).hexdigest()]
    file_upload(owner=other_owner, name="two.png", data=two)  # another owner's quota is their own


def test_a_message_is_refused_whole_over_its_caps_or_with_a_file_not_the_owners(owner, other_owner, settings):
    mine = [file_upload(owner=owner, name=f"{n}.png", data=png(10, 10, seed=n)) for n in range(3)]
    theirs = file_upload(owner=other_owner, name="theirs.png", data=png(10, 10, seed=9))
    assert [f.pk for f in files_for_message(owner=owner, file_ids=[mine[1].pk, mine[0].pk])] == [mine[1].pk, mine[0].pk]
    with pytest.raises(FileRefused) as refused:
        files_for_message(owner=owner, file_ids=[mine[0].pk, theirs.pk])
    assert refused.value.code == "file_not_found" and refused.value.status == 404
    settings.FILE_MESSAGE_MAX_FILES = 2
    with pytest.raises(FileRefused) as refused:
        files_for_message(owner=owner, file_ids=[f.pk for f in mine])
    assert refused.value.code == "too_many_files"
    settings.FILE_MESSAGE_MAX_FILES = 10
    settings.FILE_MESSAGE_MAX_BYTES = mine[0].size + 10
    with pytest.raises(FileRefused) as refused:
        files_for_message(owner=owner, file_ids=[mine[0].pk, mine[1].pk])
    assert refused.value.code == "message_files_too_large" and refused.value.status == 413


def test_the_stored_conversation_holds_the_reference_never_the_bytes(owner, inline):
    workflow, generation, ids = chat_workflow(owner)
    image = png(60, 60)
    upload = file_upload(owner=owner, name="screen.png", data=image)
    message, _, _ = chat_message_send(workflow=workflow, text="look at this", file_ids=[upload.pk])
    block = {"type": "file", "sha256": upload.sha256, "media_type": "image/png", "name": "screen.png"}
    block["size"] = len(image)
    assert ChatMessage.objects.get(pk=message.pk).meta["files"] == [{"id": upload.pk, **block}]
    conversation = stored(workflow, generation, ids["lead"])
    user = next(m for m in conversation if m["role"] == "user")
    assert user["blocks"][1:] == [block]
    assert user["blocks"][0]["text"].endswith("look at this")
    # The offline agent was handed the reference and read the bytes through the registered reader.
    assert "I received 1 image, 11 KB." in conversation[-1]["blocks"][0]["text"]
    assert len(str(conversation)) < 2000 < len(image)


def sent_with_files(owner, workflow, *files) -> list[StoredFile]:
    uploads = [file_upload(owner=owner, name=name, data=data) for name, data in files]
    chat_message_send(workflow=workflow, text="with files", file_ids=[u.pk for u in uploads])
    return uploads


def test_the_sweep_removes_only_what_nothing_refers_to_after_the_grace_period(
    owner, other_owner, inline, settings, file_storage_dir
):
    workflow, generation, ids = chat_workflow(owner)
    (kept,) = sent_with_files(owner, workflow, ("kept.png", png(5, 5, seed=1)))
    unsent = file_upload(owner=owner, name="unsent.png", data=png(5, 5, seed=2))
    # A hash another owner sent keeps its bytes while this owner's unsent row of it goes.
    shared = png(5, 5, seed=3)
    mine_unsent = file_upload(owner=owner, name="shared.png", data=shared)
    their_workflow, _, _ = chat_workflow(other_owner)
    sent_with_files(other_owner, their_workflow, ("shared.png", shared))
    # Bytes no row ever kept (an upload whose transaction rolled back after writing them).
    stray = png(5, 5, seed=4)
    bytes_put(hashlib.sha256(stray).hexdigest(), stray)

    assert files_sweep_orphans().rows_removed == 0  # within the grace period an upload may still be sent
    assert len(stored_objects(file_storage_dir)) == 4

    report = files_sweep_orphans(now=later(settings.FILE_ORPHAN_GRACE_SECONDS + 5))
    assert report.rows_removed == 2 and report.hashes_removed == 2
    assert not StoredFile.objects.filter(pk__in=[unsent.pk, mine_unsent.pk]).exists()
    assert StoredFile.objects.filter(pk=kept.pk).exists()
    assert stored_objects(file_storage_dir) == sorted([kept.sha256, mine_unsent.sha256])
    with pytest.raises(FileUnavailable):
        file_bytes_read(unsent.sha256)
    assert files_sweep_orphans(now=later(settings.FILE_ORPHAN_GRACE_SECONDS + 5)).rows_removed == 0  # idempotent


def test_clearing_the_chat_and_the_context_or_deleting_the_workflow_lets_the_sweep_take_the_bytes(
    owner, inline, settings, file_storage_dir
):
    after_grace = later(settings.FILE_ORPHAN_GRACE_SECONDS + 5)
    workflow, generation, ids = chat_workflow(owner)
    (first,) = sent_with_files(owner, workflow, ("first.pdf", pdf(1)))
    # The Context cleared: the stored conversation forgets it, but the chat still shows (and refers to) it.
    conversation_context_clear(workflow=workflow, agent_node_id=ids["lead"])
    assert files_sweep_orphans(now=after_grace).rows_removed == 0
    chat_clear(workflow=workflow)  # nothing refers to it any more
    assert files_sweep_orphans(now=after_grace).hashes_removed == 1
    assert stored_objects(file_storage_dir) == []

    (second,) = sent_with_files(owner, workflow, ("second.png", png(6, 6)))
    assert files_sweep_orphans(now=after_grace).rows_removed == 0
    workflow_delete(workflow=workflow)
    assert files_sweep_orphans(now=after_grace).hashes_removed == 1
    assert not StoredFile.objects.exists() and stored_objects(file_storage_dir) == []


def test_beat_sends_the_sweep_to_housekeeping_and_the_task_sweeps(owner, settings, file_storage_dir):
    from files.tasks import sweep_orphans

    entry = settings.CELERY_BEAT_SCHEDULE["files-sweep-orphans"]
    assert entry["task"] == sweep_orphans.name == "files.sweep_orphans"
    assert entry["options"]["queue"] == settings.CELERY_QUEUE_HOUSEKEEPING
    file_upload(owner=owner, name="never sent.png", data=png(3, 3))
    settings.FILE_ORPHAN_GRACE_SECONDS = 60
    StoredFile.objects.update(created_at=timezone.now() - timedelta(seconds=61))
    assert sweep_orphans.apply().get() == {"rows_removed": 1, "hashes_removed": 1}
    assert stored_objects(file_storage_dir) == []


def test_an_upload_of_the_same_bytes_between_the_sweeps_decision_and_its_delete_keeps_them(owner, settings):
    from tests.race import Competitor, run_before

    image = png(4, 4, seed=7)
    old = file_upload(owner=owner, name="old.png", data=image)
    StoredFile.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=3))

    def upload_again(sha256: str) -> None:
        if sha256 == old.sha256:  # the sweep decided: its row is gone; now the owner uploads the same bytes
            Competitor(lambda: file_upload(owner=owner, name="again.png", data=image)).start().result()

    with run_before("files.services._advisory_lock", upload_again):
        report = files_sweep_orphans()
    assert report.rows_removed == 1 and report.hashes_removed == 0
    (again,) = StoredFile.objects.all()
    assert again.name == "again.png" and file_bytes_read(again.sha256) == image


def test_the_sweep_waits_for_an_upload_naming_the_same_bytes_and_keeps_them(owner, settings):
    from tests.race import Competitor, run_after, wait_until_waiting_on_a_lock

    image = png(4, 4, seed=8)
    old = file_upload(owner=owner, name="old.png", data=image)
    StoredFile.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=3))
    sweeps = []

    def sweep_meanwhile(name: str) -> None:
        # The upload holds the hash's lock, its row not yet written: the sweep must wait for it, then keep the bytes.
        if name == old.sha256 and not sweeps:
            sweeps.append(Competitor(files_sweep_orphans).start())
            wait_until_waiting_on_a_lock(pid=sweeps[0].pid)

    with run_after("files.services._advisory_lock", sweep_meanwhile, once=False):
        again = file_upload(owner=owner, name="again.png", data=image)
    report = sweeps[0].result()
    assert report.rows_removed == 1 and report.hashes_removed == 0
    assert list(StoredFile.objects.values_list("pk", flat=True)) == [again.pk]
    assert file_bytes_read(again.sha256) == image


def test_bytes_a_sweep_deleted_before_the_uploads_row_was_written_are_put_back(owner, settings):
    from tests.race import Competitor, run_after

    image = png(4, 4, seed=9)
    old = file_upload(owner=owner, name="old.png", data=image)
    StoredFile.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=3))
    sweeps = []

    def sweep_now(*args) -> None:
        # The upload found the bytes stored (no write) and has no row yet: a sweep takes the old row and the bytes.
        sweeps.append(Competitor(files_sweep_orphans).start().result())

    with run_after("files.services.bytes_put", sweep_now):
        again = file_upload(owner=owner, name="again.png", data=image)
    assert sweeps[0].rows_removed == 1 and sweeps[0].hashes_removed == 1
    assert file_bytes_read(again.sha256) == image  # the upload put them back once its row was there
