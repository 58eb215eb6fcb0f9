"""The chat asks the node type behind a tool (its NodeSpec hooks) and names none: the line under an answer for each
tool call (`tool_step_summary`), and the Memory panels the page links (`memory_panel_url`)."""

from __future__ import annotations

import json

import pytest
from django.utils import timezone
from pydantic import BaseModel

from chat.models import ChatRunStep
from chat.selectors import chat_panel_links, chat_run_get, chat_thread
from chat.services import chat_message_send
from tests.agents.factories import agent_node, edge, started_workflow
from tests.chat.helpers import chat_workflow
from workflows.nodes.registry import KIND_TOOL, Handle, NodeSpec, register_node_spec, unregister_node_spec

pytestmark = pytest.mark.django_db(transaction=True)


class _NoParams(BaseModel):
    pass


@pytest.fixture
def stamp_type():
    """A tool type the chat has never heard of, with its own words for a result."""

    def summary(result):
        if isinstance(result, dict) and "stamped" in result:
            return f"Stamped   {result['stamped']}"
        return None

    register_node_spec(
        NodeSpec(
            type="stamper",
            label="Stamper",
            params_model=_NoParams,
            outputs=(Handle("output-tool", KIND_TOOL),),
            tool_name="stamp",
            tool_schema=lambda: {"description": "Stamp a text.", "parameters": {"type": "object"}},
            tool_call=lambda call: {"stamped": "[x]"},
            tool_step_summary=summary,
            memory_panel_url=lambda workflow_id, node_id: f"/stamps/{workflow_id}/{node_id}/",
        )
    )
    yield
    unregister_node_spec("stamper")


def _stamp_workflow(owner):
    return started_workflow(
        owner,
        [
            {"id": "trigger", "type": "chatTrigger", "params": {}},
            agent_node("lead", "Lead"),
            {"id": "ctx", "type": "context", "params": {}},
            {"id": "stamp", "type": "stamper", "params": {}},
        ],
        [
            edge("trigger", "output-main", "lead", "input-main"),
            edge("ctx", "output-context", "lead", "input-context"),
            edge("stamp", "output-tool", "lead", "input-tools"),
        ],
    )


def _finished_step(run, ids, name: str, result) -> None:
    ChatRunStep.objects.create(
        run=run,
        firing_id=run.firing_id,
        agent_node_id=ids["lead"],
        tool_call_id=f"call-{ChatRunStep.objects.count()}",
        name=name,
        state=ChatRunStep.State.FINISHED,
        result=json.dumps(result),
        finished_at=timezone.now(),
    )


def test_a_tool_types_own_summary_is_shown_and_a_result_shaped_like_another_types_is_not_read_as_it(
    owner, inline, stamp_type
):
    workflow, _, ids = _stamp_workflow(owner)
    _, run, _ = chat_message_send(workflow=workflow, text="hello")
    _finished_step(run, ids, "stamp", {"stamped": "[the launch]"})
    # A memory item's shape from a tool that is not memory: the chat does not call it a memory.
    _finished_step(run, ids, "stamp", {"item": {"id": 7, "version": 1, "content": "not a memory"}})
    _finished_step(run, ids, "stamp", {"error": {"code": "busy", "message": "Try later."}})
    _finished_step(run, ids, "no_such_tool", {"stamped": "[x]"})  # no node answers this name: generic line
    summaries = [step["summary"] for step in chat_thread(workflow=workflow)["messages"][-1]["run"]["steps"]]
    assert summaries == [
        "Stamped [the launch]",  # clipped by the chat (white space folded)
        '{"item": {"id": 7, "version": 1, "content": "not a memory"}}',
        "Refused: Try later.",
        '{"stamped": "[x]"}',
    ]
    assert [step["summary"] for step in chat_run_get(workflow=workflow, run_id=run.pk)["steps"]] == summaries


def test_the_page_links_the_memory_panel_of_each_node_type_that_has_one(owner, stamp_type):
    workflow, _, ids = _stamp_workflow(owner)
    assert chat_panel_links(workflow=workflow)["memory"] == [
        {"node_id": ids["stamp"], "label": "Stamper", "url": f"/stamps/{workflow.pk}/{ids['stamp']}/"}
    ]
    with_memory, _, ids = chat_workflow(owner, memory=True)
    assert chat_panel_links(workflow=with_memory)["memory"] == [
        {"node_id": ids["mem"], "label": "Memory", "url": f"/workflows/{with_memory.pk}/memory/{ids['mem']}/"}
    ]
    assert chat_panel_links(workflow=chat_workflow(owner)[0])["memory"] == []
