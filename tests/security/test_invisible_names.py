"""Names made only of invisible or direction-changing characters are refused with a clear error (issue 34): a
workflow, an agent or a token whose name shows as blank cannot be told apart from another in any list."""

from __future__ import annotations

import pytest
from django.contrib.messages import get_messages

from accounts.models import ApiToken
from core.text import is_invisible_text
from workflows.models import Workflow

pytestmark = pytest.mark.django_db

INVISIBLE = {
    "zero-width space": "\u200b\u200b",
    "right-to-left override": "\u202e",
    "tag characters": "\U000e0041\U000e0042\U000e007f",
    "joiners and a byte-order mark": "\u200d\u200c\ufeff",
    "direction isolates and marks": "\u2067\u2069\u200f\u200e",
    "a Hangul filler between spaces": " \u3164 ",
}
VISIBLE_WITH_MARKS = ["Agent\u200b", "\u202eevil", "Ω", "名前", "e\u0301"]


def test_the_check_tells_blank_names_from_visible_ones():
    assert all(is_invisible_text(name) for name in INVISIBLE.values())
    assert not any(is_invisible_text(name) for name in VISIBLE_WITH_MARKS)


def agent_graph(name: str) -> dict:
    return {
        "nodes": [
            {"id": "a1", "type": "agent", "params": {"name": name, "provider": "offline", "model": "offline-echo"}}
        ],
        "edges": [],
    }


@pytest.mark.parametrize("kind", sorted(INVISIBLE))
def test_the_api_refuses_invisible_workflow_agent_and_token_names(kind, owner, owner_client):
    name = INVISIBLE[kind]
    made = owner_client.post("/api/workflows/", {"name": name}, format="json")
    assert made.status_code == 400 and made.json()["code"] == "invalid_name"
    assert "invisible or direction-changing" in made.json()["message"]

    workflow = owner_client.post("/api/workflows/", {"name": "Visible"}, format="json").json()
    renamed = owner_client.put(
        f"/api/workflows/{workflow['id']}/",
        {"name": name, "graph": {"nodes": [], "edges": []}, "revision": workflow["revision"]},
        format="json",
    )
    assert renamed.status_code == 400 and renamed.json()["code"] == "invalid_name"

    agent = owner_client.put(
        f"/api/workflows/{workflow['id']}/",
        {"graph": agent_graph(name), "revision": workflow["revision"]},
        format="json",
    )
    assert agent.status_code == 400
    assert "invisible or direction-changing" in str(agent.json())
    with_agent = owner_client.post("/api/workflows/", {"name": "w2", "graph": agent_graph(name)}, format="json")
    assert with_agent.status_code == 400 and "invisible or direction-changing" in str(with_agent.json())

    token = owner_client.post("/api/tokens/", {"name": name}, format="json")
    assert token.status_code == 400 and token.json()["code"] == "invalid_name"
    assert "invisible or direction-changing" in token.json()["message"]

    assert list(Workflow.objects.filter(owner=owner).values_list("name", flat=True)) == ["Visible"]
    assert not ApiToken.objects.filter(user=owner).exists()


def test_the_pages_refuse_them_with_the_same_message(client, owner):
    client.force_login(owner)
    name = INVISIBLE["zero-width space"]

    def refused(response) -> str:
        assert response.status_code == 302
        return " ".join(str(m) for m in get_messages(response.wsgi_request))

    assert "invisible or direction-changing" in refused(client.post("/workflows/new/", {"name": name}))
    assert not Workflow.objects.filter(owner=owner).exists()
    kept = Workflow.objects.create(owner=owner, name="Kept")
    assert "invisible or direction-changing" in refused(client.post(f"/workflows/{kept.pk}/rename/", {"name": name}))
    kept.refresh_from_db()
    assert kept.name == "Kept"
    token_page = client.post("/settings/token/", {"action": "create", "name": name, "expires_in_days": "30"})
    assert "invisible or direction-changing" in refused(token_page)
    assert not ApiToken.objects.filter(user=owner).exists()


def test_visible_names_with_marks_in_them_are_still_accepted(owner_client):
    for name in VISIBLE_WITH_MARKS:
        made = owner_client.post("/api/workflows/", {"name": name, "graph": agent_graph(name)}, format="json")
        assert made.status_code == 201, made.json()
