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
