import pytest

from memory.models import MemoryItem
from tests.memory.helpers import NODE, OTHER_NODE

pytestmark = pytest.mark.django_db


def test_nothing_crosses_owners_workflows_or_memory_nodes(call, owner, other_owner, make_workflow, workflow):
    # Given: two owners, two workflows of the first owner, two memory nodes, one item in each namespace
    second_workflow = make_workflow(owner, name="second")
    foreign_workflow = make_workflow(other_owner, name="foreign")
    scopes = {
        "a": dict(as_owner=owner, in_workflow=workflow, node_id=NODE),
        "b": dict(as_owner=owner, in_workflow=workflow, node_id=OTHER_NODE),
        "c": dict(as_owner=owner, in_workflow=second_workflow, node_id=NODE),
        "d": dict(as_owner=other_owner, in_workflow=foreign_workflow, node_id=NODE),
    }
    ids = {}
    for name, scope in scopes.items():
        ids[name] = call({"operation": "remember", "content": f"shared secret phrase {name}"}, **scope)["item"]["id"]

    for name, scope in scopes.items():
        # Then: each namespace sees exactly its own item, by search and by listing
        recalled = call({"operation": "recall", "query": "shared secret phrase"}, **scope)["items"]
        assert [i["id"] for i in recalled] == [ids[name]]
        assert [i["id"] for i in call({"operation": "list"}, **scope)["items"]] == [ids[name]]
        for other, other_id in ids.items():
            if other == name:
                continue
            # and another namespace's id is unknown here, for every operation
            assert call({"operation": "get", "memory_id": other_id}, **scope)["error"]["code"] == "not_found"
            update = call(
                {
                    "operation": "update",
                    "memory_id": other_id,
                    "expected_version": 1,
                    "patch": {"content": "overwritten"},
                },
                **scope,
            )
            assert update["error"]["code"] == "not_found"
            forget = call({"operation": "forget", "memory_id": other_id, "expected_version": 1}, **scope)
            assert forget["error"]["code"] == "not_found"
    assert MemoryItem.objects.count() == 4
    assert not MemoryItem.objects.filter(content="overwritten").exists()


@pytest.mark.parametrize("field", ["namespace", "namespace_id", "workflow_id", "owner", "node_id", "user_id"])
def test_namespace_fields_in_the_arguments_are_refused(call, field, other_owner, make_workflow):
    foreign = make_workflow(other_owner, name="foreign")
    result = call({"operation": "recall", "query": "anything", field: foreign.pk})
    assert result["error"]["code"] == "invalid_arguments"
    assert "scope" in result["error"]["hint"]
    remember = call({"operation": "remember", "content": "x", field: foreign.pk})
    assert remember["error"]["code"] == "invalid_arguments"
    assert not MemoryItem.objects.exists()


def test_the_runtime_cannot_act_for_an_owner_on_someone_elses_workflow(call, other_owner, workflow):
    result = call({"operation": "remember", "content": "x"}, as_owner=other_owner, in_workflow=workflow)
    assert result["error"]["code"] == "not_found"
    assert not MemoryItem.objects.exists()
