import pytest

from memory.models import MemoryItem, MemoryItemHistory
from memory.tool import MEMORY_TOOL_NAME, memory_tool_call, memory_tool_definition

pytestmark = pytest.mark.django_db


def remember(call, content="The owner prefers green tea.", **extra):
    result = call({"operation": "remember", "content": content, **extra})
    assert "item" in result, result
    return result["item"]


def test_definition_is_one_schema_without_namespace_fields():
    definition = memory_tool_definition()
    assert definition["name"] == MEMORY_TOOL_NAME == "memory"
    params = definition["parameters"]
    assert params["type"] == "object" and params["additionalProperties"] is False
    assert params["required"] == ["operation"]
    assert set(params["properties"]["operation"]["enum"]) == {"remember", "recall", "list", "get", "update", "forget"}
    for field in params["properties"]:
        assert not any(word in field for word in ("namespace", "workflow", "owner", "node", "user"))
    assert params["properties"]["patch"]["additionalProperties"] is False
    assert len(definition["description"]) > 100


def test_remember_recall_list_get_update_forget_happy_path(call, fts_only):
    item = remember(call, title="Tea", category="preference", tags=["drinks"])
    assert item["version"] == 1 and item["indexing_state"] == "fts_only" and item["tags"] == ["drinks"]

    recalled = call({"operation": "recall", "query": "green tea"})
    assert [i["id"] for i in recalled["items"]] == [item["id"]]
    assert recalled["search"] == "fts" and recalled["items"][0]["score"] > 0
    assert recalled["items"][0]["indexing_state"] == "fts_only"

    listed = call({"operation": "list", "categories": ["preference"]})
    assert [i["id"] for i in listed["items"]] == [item["id"]] and listed["next_cursor"] is None

    got = call({"operation": "get", "memory_id": item["id"]})
    assert got["item"]["content"] == "The owner prefers green tea."

    updated = call(
        {
            "operation": "update",
            "memory_id": item["id"],
            "expected_version": 1,
            "patch": {"content": "The owner prefers black coffee.", "tags": ["drinks", "coffee"]},
        }
    )
    assert updated["item"]["version"] == 2 and updated["item"]["tags"] == ["drinks", "coffee"]
    assert call({"operation": "recall", "query": "coffee"})["items"][0]["id"] == item["id"]
    assert call({"operation": "recall", "query": "green tea"})["items"] == []

    forgotten = call({"operation": "forget", "memory_id": item["id"], "expected_version": 2})
    assert forgotten == {"forgotten": {"id": item["id"], "version": 2}}
    assert call({"operation": "get", "memory_id": item["id"]})["error"]["code"] == "not_found"
    assert not MemoryItem.objects.exists()
    # Forgotten content does not linger in history: only the metadata-only forget row is left.
    rows = list(MemoryItemHistory.objects.values("operation", "before", "after", "actor"))
    assert rows == [{"operation": "forget", "before": None, "after": None, "actor": "agent:1:agent:1"}]


def test_history_records_before_after_and_actor(call):
    item = remember(call)
    call(
        {"operation": "update", "memory_id": item["id"], "expected_version": 1, "patch": {"title": "T"}},
        actor="agent:1:agent:2",
    )
    update = MemoryItemHistory.objects.get(operation="update")
    assert update.before["title"] == "" and update.after["title"] == "T" and update.actor == "agent:1:agent:2"
    assert update.version == 2


@pytest.mark.parametrize(
    ("arguments", "code"),
    [
        ({"operation": "explode"}, "invalid_arguments"),
        ({}, "invalid_arguments"),
        ({"operation": "remember"}, "invalid_arguments"),
        ({"operation": "remember", "content": "   "}, "invalid_arguments"),
        ({"operation": "remember", "content": "x" * (16 * 1024 + 1)}, "content_too_long"),
        ({"operation": "remember", "content": "é" * (8 * 1024 + 1)}, "content_too_long"),  # bytes, not chars
        ({"operation": "remember", "content": "a", "title": "t" * 201}, "too_long"),
        ({"operation": "remember", "content": "a", "category": "c" * 51}, "too_long"),
        ({"operation": "remember", "content": "a", "tags": [f"t{i}" for i in range(21)]}, "too_many_tags"),
        ({"operation": "remember", "content": "a", "tags": ["t" * 51]}, "too_long"),
        ({"operation": "remember", "content": "a", "tags": "not-a-list"}, "invalid_arguments"),
        ({"operation": "remember", "content": "a", "expires_at": "next tuesday"}, "invalid_arguments"),
        ({"operation": "remember", "content": "a", "expires_at": "2001-01-01T00:00:00Z"}, "invalid_arguments"),
        ({"operation": "remember", "content": "a", "query": "x"}, "invalid_arguments"),
        ({"operation": "recall"}, "invalid_arguments"),
        ({"operation": "recall", "query": ""}, "invalid_arguments"),
        ({"operation": "recall", "query": "q" * 1001}, "too_long"),
        ({"operation": "recall", "query": "tea", "limit": 51}, "invalid_arguments"),
        ({"operation": "recall", "query": "tea", "limit": 0}, "invalid_arguments"),
        ({"operation": "recall", "query": "tea", "cursor": "garbage"}, "invalid_cursor"),
        ({"operation": "list", "cursor": "garbage"}, "invalid_cursor"),
        ({"operation": "list", "limit": "lots"}, "invalid_arguments"),
        ({"operation": "get"}, "invalid_arguments"),
        ({"operation": "get", "memory_id": "abc"}, "invalid_arguments"),
        ({"operation": "get", "memory_id": 999999}, "not_found"),
        ({"operation": "update", "memory_id": 999999, "expected_version": 1, "patch": {"title": "x"}}, "not_found"),
        ({"operation": "forget", "memory_id": 999999, "expected_version": 1}, "not_found"),
        ({"operation": "forget", "memory_id": 1}, "invalid_arguments"),
    ],
)
def test_bad_arguments_come_back_as_tool_errors_with_a_hint(call, arguments, code):
    result = call(arguments)
    assert set(result) == {"error"}, result
    assert result["error"]["code"] == code
    assert result["error"]["message"] and result["error"]["hint"]
    assert not MemoryItem.objects.exists()


def test_update_errors(call):
    item = remember(call)
    for patch, code in [
        ({}, "invalid_arguments"),
        ({"colour": "red"}, "invalid_arguments"),
        ({"content": ""}, "invalid_arguments"),
        ({"title": "t" * 201}, "too_long"),
    ]:
        result = call({"operation": "update", "memory_id": item["id"], "expected_version": 1, "patch": patch})
        assert result["error"]["code"] == code, patch
    assert call({"operation": "get", "memory_id": item["id"]})["item"]["version"] == 1


def test_stale_version_conflict_reports_the_current_version(call):
    item = remember(call)
    call({"operation": "update", "memory_id": item["id"], "expected_version": 1, "patch": {"title": "new"}})
    stale = call({"operation": "update", "memory_id": item["id"], "expected_version": 1, "patch": {"title": "old"}})
    assert stale["error"]["code"] == "version_conflict" and stale["error"]["current_version"] == 2
    assert "expected_version=2" in stale["error"]["hint"]
    stale_forget = call({"operation": "forget", "memory_id": item["id"], "expected_version": 1})
    assert stale_forget["error"]["code"] == "version_conflict" and stale_forget["error"]["current_version"] == 2
    assert call({"operation": "get", "memory_id": item["id"]})["item"]["title"] == "new"


def test_namespace_limit_is_a_tool_error(call, settings):
    settings.MEMORY_ITEMS_PER_NAMESPACE_MAX = 2
    remember(call, "one")
    remember(call, "two")
    full = call({"operation": "remember", "content": "three"})
    assert full["error"]["code"] == "namespace_full" and full["error"]["hint"]
    assert MemoryItem.objects.count() == 2


def test_arguments_as_json_string_and_nulls_for_unused_fields(call):
    result = call('{"operation": "remember", "content": "Likes jazz", "query": null}')
    assert result["item"]["content"] == "Likes jazz"
    assert call("not json")["error"]["code"] == "invalid_arguments"
    assert call(["operation"])["error"]["code"] == "invalid_arguments"


def test_an_unexpected_failure_is_an_error_result_not_a_crash(owner, workflow, monkeypatch):
    from memory import selectors

    def broken(**kwargs):
        raise RuntimeError("database on fire")

    monkeypatch.setattr(selectors, "memory_items_list", broken)
    result = memory_tool_call(
        owner=owner,
        workflow=workflow,
        node_id="n",
        arguments={"operation": "list"},
        idempotency_key="k",
        actor="agent:x",
    )
    assert result["error"]["code"] == "internal_error"
    assert "fire" not in result["error"]["message"]


def test_expires_at_can_be_set_and_cleared(call):
    item = remember(call, expires_at="2999-01-01T00:00:00Z")
    assert item["expires_at"].startswith("2999-01-01")
    updated = call(
        {"operation": "update", "memory_id": item["id"], "expected_version": 1, "patch": {"expires_at": None}}
    )
    assert updated["item"]["expires_at"] is None


@pytest.mark.parametrize(
    "arguments",
    [
        {"operation": "remember", "content": "a\x00b"},
        {"operation": "remember", "content": "a", "title": "t\x00"},
        {"operation": "remember", "content": "a", "tags": ["x\x00"]},
        {"operation": "recall", "query": "a\x00b"},
        {"operation": "list", "categories": ["a\x00b"]},
    ],
)
def test_nul_characters_are_bad_arguments_not_a_database_error(call, arguments):
    result = call(arguments)
    assert result["error"]["code"] == "invalid_arguments" and "NUL" in result["error"]["message"]
