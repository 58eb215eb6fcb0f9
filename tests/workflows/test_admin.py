"""Admin: list columns and the three confirmed actions, end to end through the test client."""

import pytest
from django.test import Client

from conversations.store import conversation_key, list_conversations, save_conversation
from memory.models import MemoryItem
from memory.services import memory_item_remember, memory_namespace_get_or_create
from providers.wire import text_message
from workflows import services
from workflows.models import ArchiveOutbox, Workflow

from .factories import basic_graph

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/workflows/workflow/"


@pytest.fixture
def staff_client(make_user):
    staff = make_user("staff", is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(staff)
    return client


@pytest.fixture
def populated(create_workflow, owner):
    workflow = create_workflow(basic_graph(with_todos=True), name="Admin target")
    services.workflow_start(workflow=workflow)
    workflow.refresh_from_db()
    pk = workflow.pk
    save_conversation(conversation_key(pk, 1, f"{pk}:agent:1"), [text_message("user", "hello")])
    namespace = memory_namespace_get_or_create(owner=owner, workflow=workflow, node_id=f"{pk}:simpleMemory:1")
    memory_item_remember(namespace=namespace, content="the owner likes tea", actor="test")
    return workflow


def _memory_count(workflow) -> int:
    return MemoryItem.objects.filter(namespace__workflow=workflow).count()


def _run(client, action, workflow, *, confirm: bool):
    data = {"action": action, "_selected_action": [workflow.pk]}
    if confirm:
        data["confirm"] = "yes"
    return client.post(CHANGELIST, data)


def test_changelist_shows_owner_generation_and_node_counts(staff_client, populated):
    page = staff_client.get(CHANGELIST).content.decode()
    assert "Admin target" in page and "owner" in page
    assert '<td class="field-live_generation">1</td>' in page
    assert '<td class="field-node_count">5</td>' in page
    assert (
        staff_client.get(f"/admin/workflows/workflowgeneration/?workflow__id__exact={populated.pk}").status_code == 200
    )
    assert staff_client.get(f"{CHANGELIST}{populated.pk}/change/").status_code == 200


def test_reset_action_asks_first_then_resets(staff_client, populated):
    page = _run(staff_client, "reset_workflows", populated, confirm=False)
    assert page.status_code == 200 and 'name="confirm" value="yes"' in page.content.decode()
    populated.refresh_from_db()
    assert populated.live_generation == 1  # nothing happened yet

    done = _run(staff_client, "reset_workflows", populated, confirm=True)
    assert done.status_code == 302
    populated.refresh_from_db()
    assert populated.live_generation == 2
    assert list_conversations(populated) == []
    assert _memory_count(populated) == 1  # reset_policy keep


def test_clear_context_action_clears_conversations_through_the_archive_listeners(staff_client, populated):
    assert _run(staff_client, "clear_context", populated, confirm=False).status_code == 200
    assert len(list_conversations(populated)) == 1
    done = _run(staff_client, "clear_context", populated, confirm=True)
    assert done.status_code == 302
    assert list_conversations(populated) == []
    row = ArchiveOutbox.objects.get(workflow_id=populated.pk)
    assert (row.reason, row.state) == ("context_cleared", "done")
    assert row.result["conversations"] == 1
    assert _memory_count(populated) == 1  # memory untouched
    assert Workflow.objects.get(pk=populated.pk).live_generation == 1


def test_clear_memory_action_removes_items_only(staff_client, populated):
    assert _run(staff_client, "clear_memory", populated, confirm=False).status_code == 200
    assert _memory_count(populated) == 1
    done = _run(staff_client, "clear_memory", populated, confirm=True)
    assert done.status_code == 302
    assert _memory_count(populated) == 0
    assert len(list_conversations(populated)) == 1  # context untouched


def test_non_staff_cannot_reach_the_admin(owner_client, owner, populated):
    client = Client()
    client.force_login(owner)
    response = _run(client, "reset_workflows", populated, confirm=True)
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
    populated.refresh_from_db()
    assert populated.live_generation == 1
