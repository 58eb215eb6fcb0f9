"""The schedule trigger as a node type: listed by /api/node-types/, checked on the canvas and refused by the API."""

from __future__ import annotations

import pytest

from tests.agents.factories import agent_node, edge
from tests.triggers.helpers import schedule_node
from triggers.models import Schedule
from workflows.graph import validate_workflow_graph
from workflows.models import Workflow

pytestmark = pytest.mark.django_db(transaction=True)


def graph_with(schedule: dict, *, second_agent: bool = False) -> dict:
    nodes = [{"id": "trigger", "type": "chatTrigger", "params": {}}, schedule, agent_node("lead", "Lead")]
    edges = [edge("trigger", "output-main", "lead", "input-main")]
    if second_agent:
        nodes.append(agent_node("other", "Other"))
        edges.append(edge(schedule["id"], "output-main", "other", "input-main"))
    else:
        edges.append(edge(schedule["id"], "output-main", "lead", "input-main"))
    return {"nodes": nodes, "edges": edges}


def codes(graph) -> list[tuple[str, str | None]]:
    return [(issue.code, issue.field) for issue in validate_workflow_graph(graph)]


def test_node_types_list_the_schedule_trigger_with_its_form_and_capabilities(owner_client):
    types = {t["type"]: t for t in owner_client.get("/api/node-types/").json()["types"]}
    schedule = types["scheduleTrigger"]
    assert schedule["palette"] and schedule["capabilities"]["isTrigger"] and schedule["capabilities"]["firesOnItsOwn"]
    assert not types["chatTrigger"]["capabilities"]["firesOnItsOwn"]
    assert set(schedule["paramsSchema"]["properties"]) == {"name", "cron", "every_minutes", "timezone", "message"}
    assert [h["id"] for h in schedule["outputs"]] == ["output-main"]


def test_a_chat_trigger_and_two_schedules_feeding_the_answering_agent_are_fine():
    graph = graph_with(schedule_node())
    graph["nodes"].append(schedule_node("sched2", cron="0 8 * * 1-5", timezone="Europe/Berlin"))
    graph["edges"].append(edge("sched2", "output-main", "lead", "input-main"))
    assert codes(graph) == []


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"cron": "0 25 * * *"}, None),
        ({"cron": "", "every_minutes": 0}, "every_minutes"),
        ({"timezone": "Atlantis/Capital"}, None),
        ({"message": ""}, "message"),
        ({"script": "import os"}, "script"),
    ],
)
def test_bad_schedules_are_graph_errors(params, field):
    found = codes(graph_with(schedule_node(**params)))
    assert found and all(code == "INVALID_PARAMS" for code, _ in found)
    if field:
        assert (("INVALID_PARAMS", field)) in found


def test_a_schedule_feeding_another_agent_than_the_chats_is_an_error():
    assert ("MULTIPLE_ANSWERING_AGENTS", None) in codes(graph_with(schedule_node(), second_agent=True))


def test_the_api_refuses_a_bad_cron_with_400_and_saves_nothing(owner_client):
    response = owner_client.post(
        "/api/workflows/", {"name": "bad", "graph": graph_with(schedule_node(cron="* * *"))}, format="json"
    )
    assert response.status_code == 400
    body = response.json()
    assert "five fields" in str(body)
    assert not Workflow.objects.exists() and not Schedule.objects.exists()
