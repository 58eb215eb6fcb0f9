"""Reads of the chat: the snapshot the page and API clients render (the active path with siblings and runs)."""

from __future__ import annotations

import json

from django.db.models import Q

from agents.selectors import chat_runs_approvals, firing_request_view
from agents.services.agent_config import agent_config_of
from agents.wiring import AgentNotFound, agent_wiring
from chat.models import ChatFeedback, ChatMarker, ChatMessage, ChatRun, ChatRunStep, ChatSession
from chat.provenance import chat_memory_marks
from chat.rendering import render_markdown, render_plain
from chat.run_stream import run_stream_state
from conversations.estimates import next_turn_estimate
from conversations.selectors import conversation_size_bytes
from core.errors import NotFoundError
from core.hub import hub_epoch
from files.sniffing import ACCEPTED
from providers.attachments import files_support
from workflows.graph import trigger_agents
from workflows.nodes import NodeSpec, get_node_spec
from workflows.selectors import generation_graph


def _duration_ms(run: ChatRun) -> int | None:
    if run.finished_at is None:
        return None
    return int((run.finished_at - run.created_at).total_seconds() * 1000)


STEP_SUMMARY_CHARS = 140


def _clip(text: str, limit: int = STEP_SUMMARY_CHARS) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit] + "…"


def step_summary(step: ChatRunStep, spec: NodeSpec | None = None) -> str:
    """A short line for a finished step: what a person would say about the result, not the JSON. The node type
    behind the tool (`spec`) says it for its own results (`NodeSpec.tool_step_summary`); a refusal (an "error"
    object, the tool contract's) and anything else get the generic line."""
    if step.state != ChatRunStep.State.FINISHED:
        return "Running…"
    try:
        data = json.loads(step.result)
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("error"), dict):
        return "Refused: " + _clip(data["error"].get("message") or data["error"].get("code") or "")
    line = spec.tool_step_summary(data) if spec is not None and spec.tool_step_summary is not None else None
    if line:
        return _clip(line)
    prefix = "Failed: " if step.is_error else ""
    return prefix + (_clip(step.result) if step.result else "No result.")


def step_state(step: ChatRunStep) -> str:
    if step.state != ChatRunStep.State.FINISHED:
        return "running"
    return "failed" if step.is_error else "done"


def step_label(step: ChatRunStep, spec: NodeSpec | None, meta: dict | None) -> str:
    """The step's line: what the node type behind the tool says of the call (`NodeSpec.tool_step_label`, from the
    binding's meta: an MCP tool names its server), else the tool's name."""
    line = None
    if spec is not None and spec.tool_step_label is not None:
        line = spec.tool_step_label(meta or {}, step_state(step))
    return _clip(line) if line else step.name


class StepTools:
    """The NodeSpec and binding meta behind a step's tool name: the node wired to the step's agent under that name
    in the graph of the run's generation (each graph read once per snapshot). None for a tool no node answers (an
    agent runtime's own tools) or a graph that is gone."""

    def __init__(self, workflow):
        self.workflow = workflow
        self._tools: dict[tuple[int, str], dict[str, tuple[str, dict]]] = {}

    def _tool(self, run: ChatRun, step: ChatRunStep) -> tuple[str, dict] | None:
        key = (run.generation, step.agent_node_id)
        if key not in self._tools:
            self._tools[key] = self._wired_tools(*key)
        return self._tools[key].get(step.name)

    def spec_of(self, run: ChatRun, step: ChatRunStep) -> NodeSpec | None:
        tool = self._tool(run, step)
        return get_node_spec(tool[0]) if tool else None

    def meta_of(self, run: ChatRun, step: ChatRunStep) -> dict | None:
        tool = self._tool(run, step)
        return tool[1] if tool else None

    def _wired_tools(self, generation: int, agent_node_id: str) -> dict[str, tuple[str, dict]]:
        try:
            # Snapshots are stored normalized (and kept in the process's cache): no need to normalize again.
            graph = generation_graph(self.workflow, generation, normalize=False)
            wiring = agent_wiring(graph, agent_node_id)
        except (NotFoundError, AgentNotFound):
            return {}
        return {tool.name: (tool.node_type, tool.meta) for tool in wiring.tools}


def step_data(step: ChatRunStep, spec: NodeSpec | None = None, meta: dict | None = None) -> dict:
    return {
        "id": step.pk,
        "name": step.name,
        "label": step_label(step, spec, meta),
        "state": step.state,
        "is_error": step.is_error,
        "agent_node_id": step.agent_node_id,
        "arguments": step.arguments or {},
        "summary": step_summary(step, spec),
        "result": step.result,
    }


def run_data(
    run: ChatRun,
    steps: list[ChatRunStep] | None = None,
    *,
    workflow,
    stream: bool = False,
    tools: StepTools | None = None,
    approvals: list[dict] | None = None,
) -> dict:
    """A run as the page and API clients read it. `tools` finds the node type behind each step (a thread's runs
    share one)."""
    tools = tools or StepTools(workflow)
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
        "steps": [step_data(s, tools.spec_of(run, s), tools.meta_of(run, s)) for s in steps],
        # Calls that asked the owner first (a teammate's too): the card while one waits, who decided what after.
        "approvals": chat_runs_approvals(chat_run_ids=[run.pk]).get(run.pk, []) if approvals is None else approvals,
        "seq": run.seq,
        "partial_text": "",
        "partial_html": "",
    }
    if stream and run.is_active:
        # The text streamed so far and the seq it stands at, read together: the page renders the text and applies
        # only deltas with a higher seq. The HTML is that text through the same renderer as the finished answer,
        # so what the owner reads while it streams is what stays.
        data["seq"], data["partial_text"] = run_stream_state(run.pk)
        data["partial_html"] = render_markdown(data["partial_text"]) if data["partial_text"] else ""
    return data


def _files_shown(meta: dict | None) -> list[dict]:
    """The files a message carries as the page shows them: name, type, size and the owner-only download."""
    return [
        {
            "id": f.get("id"),
            "name": f.get("name", ""),
            "media_type": f.get("media_type", ""),
            "size": f.get("size", 0),
            "url": f"/api/files/{f['id']}/" if f.get("id") else "",
            "is_image": str(f.get("media_type", "")).startswith("image/"),
        }
        for f in ((meta or {}).get("files") or [])
    ]


def chat_thread(*, workflow) -> dict:
    session = ChatSession.objects.filter(workflow=workflow).first()
    base = {
        "workflow_id": workflow.pk,
        "live_generation": workflow.live_generation,
        "revision": session.revision if session else 0,
        "hub_epoch": hub_epoch(),
        "messages": [],
        "markers": [],
        "active_run": None,
        "memory": {"runs": {}, "left": {}},
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
    approvals = chat_runs_approvals(chat_run_ids=[r.pk for r in runs])
    # An answer waiting for a decision can be left by an edit or a switch (which ends it first, like Stop).
    waits = active is not None and any(a["state"] == "pending" for a in approvals.get(active.pk, []))
    movable = active is None or waits
    latest_answer = path[-1].pk if path and path[-1].role == ChatMessage.Role.ASSISTANT else None
    tools = StepTools(workflow)
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
                "html": render_markdown(message.text)
                if message.role == ChatMessage.Role.ASSISTANT
                else render_plain(message.text),
                "status": message.status,
                "generation": message.generation,
                "created_at": message.created_at,
                "edit_of": (message.meta or {}).get("edit_of"),
                "error_code": (message.meta or {}).get("error_code", ""),
                # A turn a schedule or webhook sent: {"kind", "name"} (docs/triggers.md); None for the owner's own.
                "trigger": _trigger_mark(message.meta),
                "files": _files_shown(message.meta),
                # The reason in words the run detail shows too ("openai: connection failed").
                "error_message": (run.error_message if run else "") or "",
                "siblings": {
                    "index": index + 1,
                    "count": len(siblings),
                    "previous_id": siblings[index - 1] if index > 0 else None,
                    "next_id": siblings[index + 1] if index + 1 < len(siblings) else None,
                },
                "rating": ratings.get(message.pk),
                "run": run_data(
                    run, steps.get(run.pk, []), workflow=workflow, tools=tools, approvals=approvals.get(run.pk, [])
                )
                if run
                else None,
                "can_edit": message.role == ChatMessage.Role.USER
                and message.generation == workflow.live_generation
                and movable,
                "can_regenerate": message.pk == latest_answer
                and message.generation == workflow.live_generation
                and active is None,
            }
        )
    base["messages"] = out
    on_path = {m.pk for m in path}
    base["markers"] = [
        {"id": m.pk, "kind": m.kind, "after_message_id": m.after_message_id, "created_at": m.created_at}
        for m in ChatMarker.objects.filter(session=session)
        if m.after_message_id is None or m.after_message_id in on_path
    ]
    base["active_run"] = (
        run_data(
            active,
            steps.get(active.pk, []),
            workflow=workflow,
            stream=True,
            tools=tools,
            approvals=approvals.get(active.pk, []),
        )
        if active
        else None
    )
    # Provenance hook (chat/provenance.py): the memory each answer saved, and what left versions saved.
    base["memory"] = chat_memory_marks(workflow=workflow, path=path, messages=messages, children=children, runs=runs)
    return base


NO_SUCH_ANSWER = "That answer does not exist."
NO_SUCH_MESSAGE = "That message does not exist."


def _workflows_own(model, *, workflow, pk, missing: str, id_only: bool = False):
    """The `model` row with id `pk` in this workflow's chat (or only its id); another workflow's, a missing one or
    an id that is not a number is not found."""
    try:
        pk = int(pk)
    except (TypeError, ValueError):
        raise NotFoundError("not_found", missing) from None
    rows = model.objects.filter(pk=pk, session__workflow=workflow)
    found = rows.values_list("pk", flat=True).first() if id_only else rows.first()
    if found is None:
        raise NotFoundError("not_found", missing)
    return found


def chat_run_get(*, workflow, run_id) -> dict:
    run = _workflows_own(ChatRun, workflow=workflow, pk=run_id, missing=NO_SUCH_ANSWER)
    return run_data(run, workflow=workflow, stream=True)


def chat_run_answer(*, workflow, run_id) -> dict:
    """A run's state and, once it ended, its answer's text (what a webhook's caller polls for)."""
    run = _workflows_own(ChatRun, workflow=workflow, pk=run_id, missing=NO_SUCH_ANSWER)
    reply = run.reply_message
    return {
        "state": run.state,
        "outcome": run.outcome,
        "error_code": run.error_code,
        "answer": reply.text if reply is not None else None,
    }


def chat_panel_links(*, workflow) -> dict:
    """Where the page links: the Context panel, and the Memory panel of each memory node the answering agent uses."""

    links = {
        "context_url": f"/workflows/{workflow.pk}/context/",
        "memory": [],
        "agent_name": "",
        "agent_model": "",
        "file_forms": {},
    }
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
    config = agent_config_of(wiring.node)
    links["agent_model"] = config["model"]
    links["file_forms"] = answering_file_forms(provider=config["provider"], model=config["model"])
    nodes = {n.get("id"): n for n in graph.get("nodes", [])}
    for tool in wiring.tools:
        spec = get_node_spec(tool.node_type)
        if spec is not None and spec.memory_panel_url is not None:
            params = (nodes.get(tool.node_id) or {}).get("params") or {}
            links["memory"].append(
                {
                    "node_id": tool.node_id,
                    "label": params.get("name") or params.get("label") or spec.label,
                    "url": spec.memory_panel_url(workflow.pk, tool.node_id),
                }
            )
    return links


def answering_file_forms(*, provider: str, model: str) -> dict[str, str]:
    """For each accepted file type that the answering model will not get as itself, how it gets it ("as its
    extracted text (this model does not take documents)"): the chat says so under the chips before sending
    (docs/chat.md#files). Empty when every type goes as itself."""
    support = files_support(provider, model)
    described = support.describe([{"name": "", "media_type": media_type, "size": 0} for media_type in ACCEPTED])
    return {f["media_type"]: f["sent_as"] for f in described if f["form"] in ("text", "placeholder")}


def chat_run_id_of(*, workflow, run_id) -> int:
    """The id of one of this workflow's runs (another workflow's or a missing one answers not found)."""
    return _workflows_own(ChatRun, workflow=workflow, pk=run_id, missing=NO_SUCH_ANSWER, id_only=True)


def chat_branch_run_ids(*, workflow, message_id) -> list[int]:
    """The runs that answered anything on the branch starting at `message_id` (that message and every message
    under it), e.g. the version the owner left by editing or trying again."""
    pk = _workflows_own(ChatMessage, workflow=workflow, pk=message_id, missing=NO_SUCH_MESSAGE, id_only=True)
    table = ChatMessage._meta.db_table
    branch = ChatMessage.objects.raw(
        f"WITH RECURSIVE branch AS (SELECT id FROM {table} WHERE id = %s "
        f"UNION ALL SELECT m.id FROM {table} m JOIN branch b ON m.parent_id = b.id) SELECT id FROM branch",
        [pk],
    )
    message_ids = [message.pk for message in branch]
    # A run whose reply is on the branch belongs to it too: Try again leaves an answer, whose run answered its parent.
    return list(
        ChatRun.objects.filter(Q(user_message_id__in=message_ids) | Q(reply_message_id__in=message_ids)).values_list(
            "pk", flat=True
        )
    )


def chat_run_request_view(*, workflow, run_id) -> dict:
    """ "What this answer was sent": the answering firing's requests (counts, tools, recalled memories, tokens,
    cost), the owner's notes it carried, what changed since the previous answer's request, and what the next
    turn is expected to cost (the stored conversation's size at the model's input price)."""

    pk = chat_run_id_of(workflow=workflow, run_id=run_id)
    run = ChatRun.objects.get(pk=pk)
    view = (firing_request_view(firing_id=run.firing_id) if run.firing_id else None) or {"steps": []}
    previous = (
        firing_request_view(firing_id=run.parent_run.firing_id)
        if run.parent_run_id and run.parent_run and run.parent_run.firing_id
        else None
    )
    first = view["steps"][0]["request"] if view["steps"] else {}
    before = previous["steps"][0]["request"] if previous and previous["steps"] else None
    return {
        **view,
        "run_id": run.pk,
        "notes_carried": run.notes.count(),
        "changed_since_previous": None
        if before is None
        else {
            "messages": first.get("messages", 0) - before.get("messages", 0),
            "compaction_summary_now": bool(first.get("compaction_summary")) and not before.get("compaction_summary"),
            "tools_added": sorted(set(first.get("tools", [])) - set(before.get("tools", []))),
            "tools_removed": sorted(set(before.get("tools", [])) - set(first.get("tools", []))),
        },
        "next_turn": _next_turn_estimate(workflow, run, view),
    }


def _next_turn_estimate(workflow, run, view: dict) -> dict | None:
    """The stored conversation's size at the model's input price (conversations/estimates.py, the Context panel's
    estimate too)."""

    size = conversation_size_bytes(workflow_id=workflow.pk, generation=run.generation, agent_node_id=run.agent_node_id)
    if size is None:
        return None
    return next_turn_estimate(size_bytes=size, provider=view.get("provider"), model=view.get("model"))


def _trigger_mark(meta) -> dict | None:
    trigger = (meta or {}).get("trigger")
    if not isinstance(trigger, dict):
        return None
    return {"kind": str(trigger.get("kind", "")), "name": str(trigger.get("name", ""))}
