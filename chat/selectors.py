"""Reads of the chat: the snapshot the page and API clients render (the active path with siblings and runs)."""

from __future__ import annotations

from chat.events import run_stream_state
from chat.models import ChatFeedback, ChatMessage, ChatRun, ChatRunStep, ChatSession
from chat.rendering import render_markdown
from opencompany.errors import NotFoundError
from opencompany.hub import hub_epoch


def _duration_ms(run: ChatRun) -> int | None:
    if run.finished_at is None:
        return None
    return int((run.finished_at - run.created_at).total_seconds() * 1000)


def run_data(run: ChatRun, steps: list[ChatRunStep] | None = None, *, stream: bool = False) -> dict:
    steps = list(run.steps.all()) if steps is None else steps
    data = {
        "id": run.pk,
        "kind": run.kind,
        "state": run.state,
        "user_message_id": run.user_message_id,
        "reply_message_id": run.reply_message_id,
        "generation": run.generation,
        "agent_node_id": run.agent_node_id,
        "outcome": run.outcome,
        "error_code": run.error_code,
        "created_at": run.created_at,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "duration_ms": _duration_ms(run),
        "steps": [
            {"id": s.pk, "name": s.name, "state": s.state, "is_error": s.is_error, "agent_node_id": s.agent_node_id}
            for s in steps
        ],
        "seq": run.seq,
        "partial_text": "",
    }
    if stream and run.is_active:
        # The text streamed so far and the seq it stands at, read together: the page renders the text and applies
        # only deltas with a higher seq.
        data["seq"], data["partial_text"] = run_stream_state(run.pk)
    return data


def chat_thread(*, workflow) -> dict:
    session = ChatSession.objects.filter(workflow=workflow).first()
    base = {
        "workflow_id": workflow.pk,
        "live_generation": workflow.live_generation,
        "revision": session.revision if session else 0,
        "hub_epoch": hub_epoch(),
        "messages": [],
        "active_run": None,
    }
    if session is None:
        return base
    messages = {m.pk: m for m in ChatMessage.objects.filter(session=session)}
    children: dict[int | None, list[int]] = {}
    for message in messages.values():
        children.setdefault(message.parent_id, []).append(message.pk)
    path = []
    node = session.active_leaf_id
    while node is not None and node in messages:
        path.append(messages[node])
        node = messages[node].parent_id
    path.reverse()
    runs = list(ChatRun.objects.filter(session=session).order_by("id"))
    steps: dict[int, list[ChatRunStep]] = {}
    for step in ChatRunStep.objects.filter(run__session=session).order_by("id"):
        steps.setdefault(step.run_id, []).append(step)
    by_reply = {r.reply_message_id: r for r in runs if r.reply_message_id}
    ratings = dict(ChatFeedback.objects.filter(session=session).values_list("message_id", "rating"))
    active = next((r for r in runs if r.is_active), None)
    latest_answer = path[-1].pk if path and path[-1].role == ChatMessage.Role.ASSISTANT else None
    out = []
    for message in path:
        siblings = sorted(pk for pk in children.get(message.parent_id, []) if messages[pk].role == message.role)
        index = siblings.index(message.pk)
        run = by_reply.get(message.pk)
        out.append(
            {
                "id": message.pk,
                "parent_id": message.parent_id,
                "role": message.role,
                "kind": message.kind,
                "text": message.text,
                "html": render_markdown(message.text),
                "status": message.status,
                "generation": message.generation,
                "created_at": message.created_at,
                "edit_of": (message.meta or {}).get("edit_of"),
                "error_code": (message.meta or {}).get("error_code", ""),
                "siblings": {
                    "index": index + 1,
                    "count": len(siblings),
                    "previous_id": siblings[index - 1] if index > 0 else None,
                    "next_id": siblings[index + 1] if index + 1 < len(siblings) else None,
                },
                "rating": ratings.get(message.pk),
                "run": run_data(run, steps.get(run.pk, [])) if run else None,
                "can_edit": message.role == ChatMessage.Role.USER
                and message.generation == workflow.live_generation
                and active is None,
                "can_regenerate": message.pk == latest_answer
                and message.generation == workflow.live_generation
                and active is None,
            }
        )
    base["messages"] = out
    base["active_run"] = run_data(active, steps.get(active.pk, []), stream=True) if active else None
    return base


def chat_run_get(*, workflow, run_id) -> dict:
    try:
        pk = int(run_id)
    except (TypeError, ValueError):
        raise NotFoundError("not_found", "That answer does not exist.") from None
    run = ChatRun.objects.filter(pk=pk, session__workflow=workflow).first()
    if run is None:
        raise NotFoundError("not_found", "That answer does not exist.")
    return run_data(run, stream=True)


def chat_panel_links(*, workflow) -> dict:
    """Where the page links: the Context panel, and the Memory panel of each memory node the answering agent uses."""
    from agents.wiring import AgentNotFound, agent_wiring
    from workflows.graph import trigger_agents
    from workflows.selectors import generation_graph

    links = {"context_url": f"/workflows/{workflow.pk}/context/", "memory": [], "agent_name": ""}
    try:
        graph = generation_graph(workflow)
    except NotFoundError:
        return links
    agents = trigger_agents(graph)
    if not agents:
        return links
    try:
        wiring = agent_wiring(graph, agents[0])
    except AgentNotFound:
        return links
    links["agent_name"] = (wiring.node.get("params") or {}).get("name") or agents[0]
    for tool in wiring.tools:
        if tool.node_type == "simpleMemory":
            links["memory"].append({"node_id": tool.node_id, "url": f"/workflows/{workflow.pk}/memory/{tool.node_id}/"})
    return links
