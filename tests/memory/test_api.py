import pytest

from memory.models import MemoryItem
from tests.memory.helpers import NODE

pytestmark = pytest.mark.django_db


@pytest.fixture
def base(workflow):
    return f"/api/workflows/{workflow.pk}/memory/{NODE}/"


def test_crud_search_and_clear(owner_client, base, fts_only):
    created = owner_client.post(
        f"{base}items/",
        {"content": "Ship the beta on June 3", "tags": ["launch"], "category": "decision"},
        format="json",
    )
    assert created.status_code == 201, created.content
    item = created.json()
    assert item["version"] == 1 and item["indexing_state"] == "fts_only"

    listed = owner_client.get(f"{base}items/").json()
    assert [i["id"] for i in listed["items"]] == [item["id"]] and listed["next_cursor"] is None
    searched = owner_client.get(f"{base}items/", {"q": "beta", "tag": "launch"}).json()
    assert [i["id"] for i in searched["items"]] == [item["id"]] and searched["search"] == "fts"
    assert owner_client.get(f"{base}items/", {"q": "beta", "tag": "other"}).json()["items"] == []
    assert owner_client.get(f"{base}items/", {"q": "beta"}).json()["items"][0]["score"] > 0
    assert owner_client.get(f"{base}items/", {"category": "other"}).json()["items"] == []

    url = f"{base}items/{item['id']}/"
    assert owner_client.get(url).json()["content"] == "Ship the beta on June 3"
    assert owner_client.patch(url, {"content": "x"}, format="json").status_code == 400  # expected_version required
    patched = owner_client.patch(url, {"expected_version": 1, "content": "Ship the beta on June 10"}, format="json")
    assert patched.status_code == 200 and patched.json()["version"] == 2

    stale = owner_client.patch(url, {"expected_version": 1, "content": "lost"}, format="json")
    assert stale.status_code == 409
    body = stale.json()
    assert body["code"] == "version_conflict" and body["current_version"] == 2
    assert body["current"]["content"] == "Ship the beta on June 10"

    assert owner_client.delete(url).status_code == 400
    stale_delete = owner_client.delete(f"{url}?expected_version=1")
    assert stale_delete.status_code == 409 and stale_delete.json()["current"]["version"] == 2
    assert owner_client.delete(url, {"expected_version": 2}, format="json").status_code == 204
    assert owner_client.get(url).status_code == 404

    for n in range(3):
        owner_client.post(f"{base}items/", {"content": f"n{n}"}, format="json")
    cleared = owner_client.post(f"{base}clear/")
    assert cleared.status_code == 200 and cleared.json() == {"cleared": 3}
    assert not MemoryItem.objects.exists()


def test_validation_errors_have_codes(owner_client, base):
    too_long = owner_client.post(f"{base}items/", {"content": "x" * 20000}, format="json")
    assert too_long.status_code == 400 and too_long.json()["code"] == "content_too_long"
    assert too_long.json()["hint"]
    assert owner_client.post(f"{base}items/", {}, format="json").json()["code"] == "invalid_request"
    assert owner_client.get(f"{base}items/", {"limit": 500}).status_code == 400
    assert owner_client.get(f"{base}items/", {"cursor": "nope"}).json()["code"] == "invalid_cursor"


def test_idempotency_key_header_replays(owner_client, base):
    headers = {"HTTP_IDEMPOTENCY_KEY": "client-1"}
    first = owner_client.post(f"{base}items/", {"content": "once"}, format="json", **headers)
    second = owner_client.post(f"{base}items/", {"content": "once"}, format="json", **headers)
    assert first.json() == second.json() and MemoryItem.objects.count() == 1


def test_other_owners_and_unknown_nodes_get_404(owner_client, other_client, base, workflow, make_workflow, other_owner):
    item = owner_client.post(f"{base}items/", {"content": "private"}, format="json").json()
    for method, url, data in [
        ("get", f"{base}items/", None),
        ("post", f"{base}items/", {"content": "intrusion"}),
        ("get", f"{base}items/{item['id']}/", None),
        ("patch", f"{base}items/{item['id']}/", {"expected_version": 1, "content": "pwned"}),
        ("delete", f"{base}items/{item['id']}/?expected_version=1", None),
        ("post", f"{base}clear/", None),
    ]:
        response = getattr(other_client, method)(url, data, format="json")
        assert response.status_code == 404, (method, url)
        assert response.json()["code"] == "not_found"
    # an item id of another namespace is unknown in mine
    foreign_workflow = make_workflow(other_owner)
    foreign_base = f"/api/workflows/{foreign_workflow.pk}/memory/{NODE}/"
    foreign = other_client.post(f"{foreign_base}items/", {"content": "theirs"}, format="json").json()
    assert owner_client.get(f"{base}items/{foreign['id']}/").status_code == 404
    # a node that is not a memory node of this workflow
    assert owner_client.get(f"/api/workflows/{workflow.pk}/memory/1:agent:1/items/").status_code == 404
    assert MemoryItem.objects.get(pk=item["id"]).content == "private"


def test_anonymous_is_refused(api_client, base):
    assert api_client.get(f"{base}items/").status_code in (401, 403)


def test_rest_pagination_is_stable_while_items_are_added(owner_client, base):
    for n in range(7):
        owner_client.post(f"{base}items/", {"content": f"item {n}"}, format="json")
    seen, cursor = [], None
    while True:
        page = owner_client.get(f"{base}items/", {"limit": 3, **({"cursor": cursor} if cursor else {})}).json()
        seen += [i["content"] for i in page["items"]]
        owner_client.post(f"{base}items/", {"content": "added meanwhile"}, format="json")
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert seen == [f"item {n}" for n in reversed(range(7))]


def test_endpoints_are_in_the_openapi_schema(owner_client):
    response = owner_client.get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    paths = response.json()["paths"] if response["content-type"].startswith("application/json") else None
    if paths is None:
        import yaml

        paths = yaml.safe_load(response.content)["paths"]
    items = "/api/workflows/{workflow_id}/memory/{node_id}/items/"
    item = items + "{item_id}/"
    assert {"get", "post"} <= set(paths[items])
    assert {"get", "patch", "delete"} <= set(paths[item])
    assert "post" in paths["/api/workflows/{workflow_id}/memory/{node_id}/clear/"]
    assert "409" in paths[item]["patch"]["responses"]
