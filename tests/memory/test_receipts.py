import threading

import pytest
from django.db import connection

from memory.models import MemoryItem, MemoryItemHistory, MemoryReceipt
from memory.tool import memory_tool_call
from tests.memory.helpers import NODE

pytestmark = pytest.mark.django_db


def test_a_retried_remember_returns_the_first_receipt_and_writes_nothing(call):
    arguments = {"operation": "remember", "content": "Quarterly report is due on Fridays."}
    first = call(arguments, key="firing-7:toolu_1")
    again = call(arguments, key="firing-7:toolu_1")
    assert again == first
    assert MemoryItem.objects.count() == 1
    assert MemoryItemHistory.objects.count() == 1
    assert MemoryReceipt.objects.count() == 1
    # a different tool call is a different mutation
    call(arguments, key="firing-7:toolu_2")
    assert MemoryItem.objects.count() == 2


def test_a_retried_update_and_forget_return_their_receipts_even_though_the_version_moved(call):
    item = call({"operation": "remember", "content": "v1"})["item"]
    update = {"operation": "update", "memory_id": item["id"], "expected_version": 1, "patch": {"content": "v2"}}
    first = call(update, key="f:update")
    assert call(update, key="f:update") == first
    assert MemoryItem.objects.get().version == 2
    assert MemoryItemHistory.objects.filter(operation="update").count() == 1

    forget = {"operation": "forget", "memory_id": item["id"], "expected_version": 2}
    first_forget = call(forget, key="f:forget")
    assert call(forget, key="f:forget") == first_forget == {"forgotten": {"id": item["id"], "version": 2}}


def test_reusing_a_key_for_a_different_change_is_refused(call):
    call({"operation": "remember", "content": "one"}, key="same")
    other = call({"operation": "remember", "content": "two"}, key="same")
    assert other["error"]["code"] == "idempotency_key_reused"
    assert MemoryItem.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_retries_of_one_call_store_one_item(owner, make_workflow):
    workflow = make_workflow(owner)
    barrier = threading.Barrier(2)
    results = []

    def retry():
        try:
            barrier.wait()
            results.append(
                memory_tool_call(
                    owner=owner,
                    workflow=workflow,
                    node_id=NODE,
                    arguments={"operation": "remember", "content": "once"},
                    idempotency_key="firing-1:call-1",
                    actor="agent:a",
                )
            )
        finally:
            connection.close()

    threads = [threading.Thread(target=retry) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 2 and results[0] == results[1] and "item" in results[0]
    assert MemoryItem.objects.count() == 1


def test_a_retry_is_answered_by_its_receipt_even_when_doing_it_again_would_fail(call, settings):
    # The receipt is not looked up before the work: a retry redoes it, rolls it back and answers the first result.
    settings.MEMORY_ITEMS_PER_NAMESPACE_MAX = 1
    first = call({"operation": "remember", "content": "the only one"}, key="f:remember")
    assert call({"operation": "remember", "content": "another"})["error"]["code"] == "namespace_full"
    assert call({"operation": "remember", "content": "the only one"}, key="f:remember") == first
    assert MemoryItem.objects.count() == 1
