"""A GET never writes: opening a Memory panel (page or API) of a node nothing was stored in creates no row."""

from __future__ import annotations

import pytest
from django.test import Client

from memory.models import MemoryNamespace
from tests.chat.helpers import chat_workflow

pytestmark = pytest.mark.django_db


def test_opening_a_memory_panel_with_get_creates_no_namespace(owner, owner_client):
    workflow, _generation, ids = chat_workflow(owner, memory=True, start=False)
    page = Client()
    page.force_login(owner)
    base = f"/workflows/{workflow.pk}/memory/{ids['mem']}/"
    api = f"/api/workflows/{workflow.pk}/memory/{ids['mem']}/items/"
    assert page.get(base).status_code == 200
    assert page.get(base, {"q": "anything"}).status_code == 200
    listed = owner_client.get(api)
    assert listed.status_code == 200 and listed.json()["items"] == []
    assert owner_client.get(api + "1/").status_code == 404
    assert page.get(base + "clear/").status_code == 200  # the confirmation page
    history = owner_client.get(f"/api/workflows/{workflow.pk}/memory/{ids['mem']}/history/")
    assert history.status_code == 200 and history.json() == {"versions": []}
    assert not MemoryNamespace.objects.exists()

    # The first write makes it, as before.
    assert owner_client.post(api, {"content": "a fact"}, format="json").status_code == 201
    assert MemoryNamespace.objects.count() == 1
    assert page.get(base).status_code == 200 and "a fact" in page.get(base).content.decode()
