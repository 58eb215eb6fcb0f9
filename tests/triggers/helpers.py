"""Helpers for the trigger tests: a workflow whose answering agent a chat trigger and a schedule feed."""

from __future__ import annotations

from tests.agents.factories import agent_node, edge, started_workflow


def schedule_node(node_id: str = "sched", **params) -> dict:
    base = {
        "name": "Morning",
        "cron": "",
        "every_minutes": None,
        "timezone": "UTC",
        "message": "Go {name} {date} {time}",
    }
    base.update(params)
    if not base["cron"] and base["every_minutes"] is None:
        base["every_minutes"] = 5
    return {"id": node_id, "type": "scheduleTrigger", "params": base}


def scheduled_workflow(owner, *, start: bool = True, **params):
    nodes = [
        {"id": "trigger", "type": "chatTrigger", "params": {}},
        schedule_node(**params),
        agent_node("lead", "Lead"),
        {"id": "ctx", "type": "context", "params": {}},
    ]
    edges = [
        edge("trigger", "output-main", "lead", "input-main"),
        edge("sched", "output-main", "lead", "input-main"),
        edge("ctx", "output-context", "lead", "input-context"),
    ]
    if start:
        return started_workflow(owner, nodes, edges, name="schedule test")
    from workflows.services import workflow_create

    outcome = workflow_create(owner=owner, name="schedule test", graph={"nodes": nodes, "edges": edges})
    return outcome.workflow, 0, {n["id"]: outcome.aliases.get(n["id"], n["id"]) for n in nodes}


def webhook_workflow(owner, *, start: bool = True, **params):
    """A chat trigger and a webhook trigger feeding the answering agent."""
    base = {"name": "Tickets", "message": "Ticket: {body.title} / {body.items[0].name}", "signing_secret": ""}
    base.update(params)
    nodes = [
        {"id": "trigger", "type": "chatTrigger", "params": {}},
        {"id": "hook", "type": "webhookTrigger", "params": base},
        agent_node("lead", "Lead"),
        {"id": "ctx", "type": "context", "params": {}},
    ]
    edges = [
        edge("trigger", "output-main", "lead", "input-main"),
        edge("hook", "output-main", "lead", "input-main"),
        edge("ctx", "output-context", "lead", "input-context"),
    ]
    return started_workflow(owner, nodes, edges, name="webhook test")


def both_triggers_workflow(owner, *, schedule: dict | None = None, hook: dict | None = None, **agent_params):
    """The chat trigger, a schedule ("Morning", every 5 minutes) and a webhook ("Tickets") feeding one agent."""
    hook_params = {"name": "Tickets", "message": "Ticket: {body.title}", "signing_secret": ""}
    hook_params.update(hook or {})
    nodes = [
        {"id": "trigger", "type": "chatTrigger", "params": {}},
        schedule_node(**(schedule or {})),
        {"id": "hook", "type": "webhookTrigger", "params": hook_params},
        agent_node("lead", "Lead", **agent_params),
        {"id": "ctx", "type": "context", "params": {}},
    ]
    edges = [
        edge("trigger", "output-main", "lead", "input-main"),
        edge("sched", "output-main", "lead", "input-main"),
        edge("hook", "output-main", "lead", "input-main"),
        edge("ctx", "output-context", "lead", "input-context"),
    ]
    return started_workflow(owner, nodes, edges, name="both triggers")
