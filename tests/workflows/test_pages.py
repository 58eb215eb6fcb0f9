import pytest
from django.test import Client

from .factories import basic_graph

pytestmark = pytest.mark.django_db


def test_detail_page_shows_nodes_for_the_owner_only(create_workflow, owner, other_owner):
    workflow = create_workflow(basic_graph(with_todos=True), name="Page target")
    client = Client()
    client.force_login(owner)
    page = client.get(f"/workflows/{workflow.pk}/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "Page target" in text and f"{workflow.pk}:context:1" in text and "Context of Lead" in text
    assert f"/workflows/{workflow.pk}/chat/" in text
    assert f"/workflows/{workflow.pk}/context/?node={workflow.pk}%3Acontext%3A1" in text
    assert f"/workflows/{workflow.pk}/memory/{workflow.pk}:simpleMemory:1/" in text
    intruder = Client()
    intruder.force_login(other_owner)
    assert intruder.get(f"/workflows/{workflow.pk}/").status_code == 404
