import pytest
from django.test import Client

from memory.models import MemoryItem, MemoryItemHistory

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff(make_user):
    user = make_user("staffer", is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(user)
    return user, client


def test_search_edit_with_version_check_history_and_bulk_forget(staff, call, owner):
    user, client = staff
    item = call({"operation": "remember", "content": "Admin searchable needle", "tags": ["t"]})["item"]
    other = call({"operation": "remember", "content": "Second thing"})["item"]
    changelist = "/admin/memory/memoryitem/"
    assert f"/{item['id']}/change/" in client.get(changelist, {"q": "needle"}).content.decode()
    assert f"/{item['id']}/change/" in client.get(changelist, {"q": owner.username}).content.decode()
    assert f"/{other['id']}/change/" not in client.get(changelist, {"q": "needle"}).content.decode()

    url = f"/admin/memory/memoryitem/{item['id']}/change/"
    page = client.get(url).content.decode()
    assert "Admin searchable needle" in page and "remember" in page  # history inline
    form = {
        "title": "",
        "content": "Edited by staff",
        "category": "",
        "tags": "t",
        "expires_at_0": "",
        "expires_at_1": "",
        "expected_version": 1,
        "history-TOTAL_FORMS": 1,
        "history-INITIAL_FORMS": 1,
        "history-MIN_NUM_FORMS": 0,
        "history-MAX_NUM_FORMS": 1000,
        "history-0-id": MemoryItemHistory.objects.get(item_id=item["id"]).pk,
        "history-0-item": item["id"],
    }
    response = client.post(url, form)
    assert response.status_code == 302, response.content.decode()[:3000]
    stored = MemoryItem.objects.get(pk=item["id"])
    assert (stored.content, stored.version) == ("Edited by staff", 2)
    assert MemoryItemHistory.objects.filter(item_id=item["id"], operation="update").get().actor == f"staff:{user.pk}"

    stale = client.post(url, {**form, "content": "stale edit", "expected_version": 1})
    assert stale.status_code == 200 and "changed this memory meanwhile" in stale.content.decode()
    assert MemoryItem.objects.get(pk=item["id"]).content == "Edited by staff"

    response = client.post(changelist, {"action": "forget_selected", "_selected_action": [item["id"], other["id"]]})
    assert response.status_code == 302
    assert not MemoryItem.objects.exists()
    assert set(MemoryItemHistory.objects.values_list("operation", flat=True)) == {"forget"}


def test_non_staff_cannot_open_admin(owner, call):
    item = call({"operation": "remember", "content": "x"})["item"]
    client = Client()
    client.force_login(owner)
    assert client.get(f"/admin/memory/memoryitem/{item['id']}/change/").status_code == 302


def _edit(call, item_id, version, content):
    return call(
        {"operation": "update", "memory_id": item_id, "expected_version": version, "patch": {"content": content}}
    )["item"]


def test_admin_history_shows_word_diffs_and_restores_a_version_as_staff(staff, call):
    user, client = staff
    item = call({"operation": "remember", "content": "The cat is called Tom"})["item"]
    _edit(call, item["id"], 1, "The cat is called Felix")
    _edit(call, item["id"], 2, "The cat is called Felix and sleeps all day")
    history_url = f"/admin/memory/memoryitem/{item['id']}/history/"

    page = client.get(history_url).content.decode()

    # each version beside the one before, the change marked word by word (the panel's diff)
    assert "<del>Tom</del>" in page and "<ins>Felix</ins>" in page and "<ins> and sleeps all day</ins>" in page
    assert page.count('value="Restore this version"') == 2  # versions 1 and 2; the current one is not offered
    assert "source</th><td>agent" in page
    # the change page's History button leads here
    assert history_url in client.get(f"/admin/memory/memoryitem/{item['id']}/change/").content.decode()

    restore_url = f"/admin/memory/memoryitem/{item['id']}/restore/"
    response = client.post(restore_url, {"version": 1, "expected_version": 3}, follow=True)

    assert "Version 1 restored: it is now version 4." in response.content.decode()
    stored = MemoryItem.objects.get(pk=item["id"])
    assert (stored.content, stored.version) == ("The cat is called Tom", 4)
    row = MemoryItemHistory.objects.get(item_id=item["id"], version=4)
    assert (row.operation, row.source, row.actor) == ("update", "staff", f"staff:{user.pk}")
    assert row.detail["restored_version"] == 1

    # a stale page: the version check refuses, nothing is written
    response = client.post(restore_url, {"version": 2, "expected_version": 3}, follow=True)
    assert "Not restored: the item changed meanwhile (now version 4)" in response.content.decode()
    assert MemoryItem.objects.get(pk=item["id"]).version == 4


def test_admin_history_of_a_forgotten_item_offers_no_restore(staff, call):
    _, client = staff
    item = call({"operation": "remember", "content": "Gone soon"})["item"]
    call({"operation": "forget", "memory_id": item["id"], "expected_version": 1})
    page = client.get(f"/admin/memory/memoryitem/{item['id']}/history/").content.decode()
    assert "This item was forgotten" in page and "Version 1 · forget" in page and "Restore this version" not in page
    assert "Gone soon" not in page  # what a forgotten memory said is not kept
    assert client.post(f"/admin/memory/memoryitem/{item['id']}/restore/", {"version": 1}).status_code == 404


def test_restore_is_for_staff_who_may_change_and_owners_keep_their_own_rules(call, owner, other_owner, make_user):
    from django.contrib.auth.models import Permission

    item = call({"operation": "remember", "content": "Original words"})["item"]
    _edit(call, item["id"], 1, "Changed words")
    history_url = f"/admin/memory/memoryitem/{item['id']}/history/"
    restore_url = f"/admin/memory/memoryitem/{item['id']}/restore/"
    form = {"version": 1, "expected_version": 2}

    # anonymous, the item's own owner and another owner, none staff: the admin sends them to its login
    for user in (None, owner, other_owner):
        client = Client()
        if user is not None:
            client.force_login(user)
        for response in (client.get(history_url), client.post(restore_url, form)):
            assert response.status_code == 302 and response["Location"].startswith("/admin/login/")
    # another owner cannot reach it through the Memory panel either: not theirs is "not found"
    client = Client()
    client.force_login(other_owner)
    workflow_id = MemoryItem.objects.select_related("namespace").get(pk=item["id"]).namespace.workflow_id
    panel_restore = f"/workflows/{workflow_id}/memory/1:simpleMemory:1/items/{item['id']}/restore/"
    assert client.post(panel_restore, form).status_code == 404
    assert client.get(panel_restore.replace("/restore/", "/history/")).status_code == 404

    # staff who may only view memory items see the versions but get no restore
    viewer = make_user("viewer", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_memoryitem"))
    client = Client()
    client.force_login(viewer)
    page = client.get(history_url)
    assert page.status_code == 200 and "<ins>Changed</ins>" in page.content.decode()
    assert "Restore this version" not in page.content.decode()
    assert client.post(restore_url, form).status_code == 403

    stored = MemoryItem.objects.get(pk=item["id"])
    assert (stored.content, stored.version) == ("Changed words", 2)
    assert not MemoryItemHistory.objects.filter(item_id=item["id"], source="staff").exists()
