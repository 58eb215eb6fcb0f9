"""Shared helpers for chat tests (fixtures live in conftest.py files; these are imported)."""

from __future__ import annotations

from conversations.store import conversation_key, load_conversation
from tests.agents.factories import agent_node, edge, started_workflow
from tests.processes import REPO_ROOT
from tests.waiting import wait_until

__all__ = ["BROWSER_PASSWORD", "LONG", "answers", "chat_workflow", "shot", "stored", "texts", "wait_until"]

ARTIFACTS = REPO_ROOT / "test-artifacts" / "chat"
BROWSER_PASSWORD = "pw-for-browser-1"
LONG = " ".join(f"word{i}" for i in range(300))  # an answer long enough to be stopped or cut while it streams


def stored(workflow, generation, agent) -> list[dict]:
    return load_conversation(conversation_key(workflow.pk, generation, agent))


def texts(messages: list[dict]) -> list[str]:
    return ["".join(b.get("text", "") for b in m["blocks"] if b["type"] == "text") for m in messages]


def chat_workflow(owner, *, memory: bool = False, teammate: bool = False, start: bool = True):
    nodes = [
        {"id": "trigger", "type": "chatTrigger", "params": {}},
        agent_node("lead", "Lead"),
        {"id": "ctx", "type": "context", "params": {}},
    ]
    edges = [
        edge("trigger", "output-main", "lead", "input-main"),
        edge("ctx", "output-context", "lead", "input-context"),
    ]
    if memory:
        nodes.append({"id": "mem", "type": "simpleMemory", "params": {"reset_policy": "keep"}})
        edges.append(edge("mem", "output-tool", "lead", "input-tools"))
    if teammate:
        nodes += [agent_node("helper", "Helper"), {"id": "ctx2", "type": "context", "params": {}}]
        edges += [
            edge("helper", "output-tool", "lead", "input-tools"),
            edge("ctx2", "output-context", "helper", "input-context"),
        ]
    if start:
        return started_workflow(owner, nodes, edges, name="chat test")
    from workflows.services import workflow_create

    outcome = workflow_create(owner=owner, name="chat test", graph={"nodes": nodes, "edges": edges})
    return outcome.workflow, 0, {n["id"]: outcome.aliases.get(n["id"], n["id"]) for n in nodes}


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def answers(page):
    """The chat page's finished answers."""
    return page.locator("#thread > li.msg.assistant:not(.streaming)")
