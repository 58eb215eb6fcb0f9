"""The NodeSpec registry: the single source of truth for a node type.

A type's handles, parameter schema, capabilities, LLM-visible tool name and lifecycle hooks live on its
spec. The normalizer, the validator, the wiring helpers and the reset service read specs only, so a new type
registers here (or from another app's AppConfig.ready()) without touching any of them.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

# Capability names (docs/workflows.md#capabilities). Code asks a spec for a capability, never for a list of types.
REQUIRES_CONTEXT = "requiresContext"
IS_CONTEXT_PANEL = "isContextPanel"
SYSTEM_MANAGED = "systemManaged"
IS_AGENT = "isAgent"  # fires as an LLM agent; as a tool node it is a teammate the runtime delegates to
IS_TRIGGER = "isTrigger"  # where the owner's chat message enters
# A trigger that starts turns by itself (a schedule, a webhook): a workflow may have several, all feeding the one
# answering agent, whose chat thread shows their turns.
FIRES_ON_ITS_OWN = "firesOnItsOwn"

# Handle kinds: an edge connects an output and an input of the same kind.
KIND_MAIN = "main"
KIND_CONTEXT = "context"
KIND_TOOL = "tool"


@dataclass(frozen=True)
class Handle:
    id: str
    kind: str
    # How many edges the handle takes before the validator objects (None: any number). The editor shows it; the
    # validator's codes, not the editor, are what refuse a save.
    max_connections: int | None = None
    label: str = ""


@dataclass(frozen=True)
class ResetContext:
    """What a reset hook may know about the reset it is part of."""

    actor: Any
    previous_generation: int
    new_generation: int
    reason: str = "reset"


@dataclass(frozen=True)
class ToolCall:
    """One call of a node's tool, as the runtime hands it to the node's `tool_call` hook."""

    owner: Any
    workflow: Any
    node_id: str
    arguments: dict
    # Stable per call: a retried step must get the first answer, not a second effect (receipts).
    idempotency_key: str
    actor: str  # who calls, for audit: "agent:<node id>"
    # Where the call comes from, for provenance: firing_id, chat_run_id, agent_node_id, agent_name, generation,
    # tool_call_id, prompt (what the agent was answering).
    origin: dict = field(default_factory=dict)
    # The binding's meta from the node's ToolOffer (an MCP server's own tool name and connection).
    meta: dict = field(default_factory=dict)
    # For a remote tool: polled while the call runs; True means the owner pressed Stop (cancel the call).
    should_stop: Callable[[], bool] | None = None


@dataclass(frozen=True)
class ToolText:
    """A tool's answer given as the text the model reads (an MCP server's result), instead of a dict sent as JSON."""

    text: str
    is_error: bool = False


@dataclass(frozen=True)
class ToolOffer:
    """One tool a node offers the agent it is wired to (a node may offer several: an MCP server's tools)."""

    name: str  # what the model sees: unique per agent, within every provider's name rules
    description: str
    parameters: dict  # JSON Schema of the arguments
    # What the node's `tool_call` hook needs to answer it (an MCP server's own name for the tool, how to reach the
    # server): copied into the firing's binding, so a generation keeps the list it started with.
    meta: dict = field(default_factory=dict)
    # Answered by a remote server: the runtime calls it outside any transaction, records it `started` before the
    # call, and never sends it again once it may have reached the server (docs/tools.md#never-re-sent).
    remote: bool = False


@dataclass(frozen=True)
class NodeSpec:
    type: str
    label: str
    params_model: type[BaseModel]
    inputs: tuple[Handle, ...] = ()
    outputs: tuple[Handle, ...] = ()
    capabilities: frozenset[str] = frozenset()
    # The name the model sees when this node is wired as a tool: a string, or a function of the node (an agent
    # used as a tool is named after its display name).
    tool_name: str | Callable[[dict], str] | None = None
    # The tool contract: `tool_schema() -> {"description", "parameters" (JSON Schema)}` is what the model is offered;
    # `tool_call(call: ToolCall) -> dict` answers one call (an "error" key or "ok": False marks a refusal the model
    # can act on); `tool_prepare(arguments, *, workflow, node_id)` does what a call needs from a remote service
    # before the transaction that answers it (no remote call may run under the firing's row lock). The runtime
    # reads only these, never a node type's name.
    tool_schema: Callable[[], dict] | None = None
    # `tools(node) -> list[ToolOffer]`: a node that offers several tools, or tools that depend on its params (an MCP
    # server). Without it, the node offers the one tool `tool_name` + `tool_schema` describe. Read through
    # `tools_for`.
    tools: Callable[[dict], list[ToolOffer]] | None = None
    tool_call: Callable[[ToolCall], dict] | None = None
    tool_prepare: Callable[..., None] | None = None
    # `tool_step_summary(result) -> str | None`: a short line a person would say about one call's result (the
    # decoded JSON the tool answered), shown under the chat's answer; None leaves the chat's generic line.
    tool_step_summary: Callable[[Any], str | None] | None = None
    # `tool_step_label(meta, state) -> str | None`: the step's line in the chat while a call runs and after it, from
    # the tool's binding `meta` and `state` ("running", "done" or "failed"): "Calling get_time on time…". None
    # leaves the tool's name.
    tool_step_label: Callable[[dict, str], str | None] | None = None
    # memory_panel_url(workflow_id, node_id) -> str: the owner's Memory panel of a node that holds memory (the chat
    # page links the ones its answering agent uses).
    memory_panel_url: Callable[[int, str], str] | None = None
    # reset_execution_state(workflow, node, *, policy_context: ResetContext) -> int | None (items cleared)
    reset_execution_state: Callable[..., Any] | None = None
    # clear_memory(workflow, node, *, actor) -> int: the admin/panel "Clear Memory" for nodes that hold memory.
    clear_memory: Callable[..., int] | None = None
    # The one legacy rewrite (docs/workflows.md#legacy-rewrite): an edge from one of `legacy_outputs` into a
    # `legacy_inputs` handle is the old
    # memory wiring; `legacy_upgrade(params) -> (params, transcripts)` strips old params and returns any recognised
    # Markdown transcripts, either as one string or as {old_agent_id: markdown}.
    legacy_outputs: tuple[str, ...] = ()
    legacy_inputs: tuple[str, ...] = ()
    legacy_upgrade: Callable[[dict], tuple[dict, Any]] | None = None
    description: str = ""
    # Params a node of this type starts with when the owner adds it from the palette (the schema may require
    # fields without a default, like an agent's model).
    new_params: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)

    def has(self, capability: str) -> bool:
        return capability in self.capabilities

    def input(self, handle_id: str) -> Handle | None:
        return next((h for h in self.inputs if h.id == handle_id), None)

    def output(self, handle_id: str) -> Handle | None:
        return next((h for h in self.outputs if h.id == handle_id), None)

    def tool_name_for(self, node: dict) -> str | None:
        if callable(self.tool_name):
            return self.tool_name(node)
        return self.tool_name

    def tools_for(self, node: dict) -> list[ToolOffer]:
        """The tool contract: every tool a node of this type offers when wired as a tool (an agent used as a tool is
        a teammate, which the runtime offers itself)."""
        if self.tools is not None:
            return list(self.tools(node))
        name = self.tool_name_for(node)
        if self.tool_schema is None or not name:
            return []
        definition = self.tool_schema()
        return [ToolOffer(name, definition["description"], definition["parameters"])]

    def tool_names_for(self, node: dict) -> list[str]:
        """The names the model sees for a node wired as a tool (teammates included), for wiring and graph checks."""
        if self.tools is not None:
            return [offer.name for offer in self.tools(node)]
        name = self.tool_name_for(node)
        return [name] if name else []


_registry: dict[str, NodeSpec] = {}
_lock = threading.Lock()


def register_node_spec(spec: NodeSpec, *, replace: bool = False) -> NodeSpec:
    """Add a node type. Registering the same type twice is an error unless `replace` (tests, overrides)."""
    with _lock:
        if spec.type in _registry and not replace and _registry[spec.type] is not spec:
            raise ValueError(f"node type {spec.type!r} is already registered")
        _registry[spec.type] = spec
    return spec


def unregister_node_spec(node_type: str) -> None:
    with _lock:
        _registry.pop(node_type, None)


def get_node_spec(node_type: Any) -> NodeSpec | None:
    if not isinstance(node_type, str):
        return None
    return _registry.get(node_type)


def node_specs() -> list[NodeSpec]:
    return list(_registry.values())


def specs_with(capability: str) -> list[NodeSpec]:
    return [spec for spec in node_specs() if spec.has(capability)]


_SLUG_JUNK = re.compile(r"[^a-z0-9]+")


def tool_slug(name: Any, *, fallback: str = "agent") -> str:
    """A provider-safe tool name (`^[a-z0-9_]{1,64}$`) from a display name."""
    text = name if isinstance(name, str) else ""
    slug = _SLUG_JUNK.sub("_", text.lower()).strip("_")[:64].strip("_")
    return slug or fallback
