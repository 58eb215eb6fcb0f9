"""The node types workflows itself owns: the chat trigger, the agent, the Context and the todos list.

Registered by `WorkflowsConfig.ready()` (after every model is loaded); a type another app owns is registered by that
app's `ready()` (the Memory node: `memory/node.py`), so this module names no higher app."""

from __future__ import annotations

from typing import Annotated, Literal

from django.conf import settings
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from ..todos import todos_clear, todos_tool, todos_tool_schema
from .registry import (
    IS_AGENT,
    IS_CONTEXT_PANEL,
    IS_TRIGGER,
    KIND_CONTEXT,
    KIND_MAIN,
    KIND_TOOL,
    REQUIRES_CONTEXT,
    SYSTEM_MANAGED,
    Handle,
    NodeSpec,
    ResetContext,
    tool_slug,
)


def _bounded(setting_name: str):
    # Read at validation time, so a deployment (or a test) that changes the limit takes effect at once.
    def check(value: str) -> str:
        limit = getattr(settings, setting_name)
        if len(value) > limit:
            raise ValueError(f"at most {limit} characters")
        return value

    return AfterValidator(check)


class NoParams(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AgentParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Annotated[str, Field(min_length=1), _bounded("WORKFLOW_AGENT_NAME_MAX_CHARS")] = "Agent"
    provider: Literal[
        "openai",
        "anthropic",
        "gemini",
        "openai_compatible",
        "offline",
        "claude_code",
        "codex_cli",
        "vertex_agent",
        "rlm",
    ] = Field(
        "offline",
        description=(
            "Where the agent runs. Fidelity per provider: the native APIs (openai, anthropic, gemini) are "
            "provider-replayable; claude_code: exact observable stream plus explicit session binding; codex_cli: "
            "observable-only, non-resumable; vertex_agent: exact observable events plus interaction/environment "
            "binding (Google keeps the interaction state server-side; we keep the events, the interaction id and "
            "the environment id); rlm: observable-only, non-resumable (providers/README.md)."
        ),
    )
    # `x-widget` tells the editor to offer the provider's models from the catalogue (/api/node-types/).
    model: Annotated[
        str,
        Field(min_length=1, json_schema_extra={"x-widget": "model", "x-provider-field": "provider"}),
        _bounded("WORKFLOW_AGENT_MODEL_MAX_CHARS"),
    ]
    system_prompt: Annotated[
        str, Field(json_schema_extra={"x-widget": "textarea"}), _bounded("WORKFLOW_AGENT_SYSTEM_PROMPT_MAX_CHARS")
    ] = ""
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    temperature_confirmed: bool | None = Field(
        None,
        description=(
            "Gemini 3 and later: Google recommends keeping these models at their default temperature of 1.0 "
            "(lower values can make them loop or answer worse), so the temperature above is sent to them only "
            "when this is checked."
        ),
    )
    max_output_tokens: Annotated[int, Field(ge=1)] | None = None
    thinking: Literal["off", "low", "medium", "high"] | None = None
    max_iterations: Annotated[int, Field(ge=1)] | None = None
    compaction_threshold: Annotated[float, Field(ge=0.1, le=0.95)] | None = None
    # Agent runtimes only: the CLI's built-in tools the agent may use (e.g. "Read", "Grep"). Empty, the default:
    # none, so no shell command and no file write.
    runtime_tools: list[Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z][A-Za-z0-9_]*$")]] = (
        Field(
            default=[],
            max_length=50,
            description="Agent runtimes (claude_code, codex_cli): the built-in tools allowed, e.g. Read. Empty: none.",
        )
    )

    # Vertex managed agent (provider vertex_agent) only: where the agent lives and which sandbox it works in.
    project: Annotated[str, Field(max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9-:.]*$")] | None = Field(
        None, description="vertex_agent: the Google Cloud project the agent runs in."
    )
    location: Annotated[str, Field(max_length=50, pattern=r"^[A-Za-z0-9-]+$")] | None = Field(
        None, description="vertex_agent: the Vertex location of the Interactions API (default: global)."
    )
    agent: Annotated[str, Field(max_length=300, pattern=r"^[A-Za-z0-9][A-Za-z0-9._/-]*$")] | None = Field(
        None,
        description=(
            "vertex_agent: the agent each firing interacts with (a managed agent id such as the Antigravity agent, "
            "or your custom agent's name)."
        ),
    )
    environment: Annotated[str, Field(max_length=200, pattern=r"^[A-Za-z0-9][A-Za-z0-9._/-]*$")] | None = Field(
        None,
        description=(
            'vertex_agent: "remote" (the default: a new sandbox, then the one the conversation is bound to) or a '
            "pinned environment id. Google keeps the interaction state and the sandbox's files server-side; "
            "OpenCompany keeps the streamed events, the interaction id and the environment id."
        ),
    )

    @model_validator(mode="after")
    def _vertex_needs_its_agent(self):
        if self.provider == "vertex_agent" and not (self.project and self.agent):
            raise ValueError("a vertex_agent needs project and agent")
        return self

    # RLM only (provider "rlm", providers/runtimes/rlm/): where its model runs and the limits of one run.
    rlm_backend: Literal["openai", "openai_compatible"] | None = Field(
        None,
        title="RLM backend",
        description="RLM: the backend serving `model`: openai (default) or openai_compatible (its base URL).",
    )
    rlm_max_iterations: Annotated[int, Field(ge=1, le=50)] | None = Field(
        None, title="RLM max iterations", description="RLM: iterations per run (default 10)."
    )
    rlm_timeout_seconds: Annotated[int, Field(ge=5, le=3600)] | None = Field(
        None,
        title="RLM timeout (seconds)",
        description="RLM: wall-clock limit of one run in seconds (default 300; the firing's limit still applies).",
    )
    rlm_max_depth: Annotated[int, Field(ge=1, le=3)] | None = Field(
        None,
        title="RLM sub-call depth",
        description="RLM: sub-call depth (default 1: llm_query answers plainly; 2 or 3: rlm_query runs a child).",
    )
    rlm_max_llm_calls: Annotated[int, Field(ge=1, le=500)] | None = Field(
        None,
        title="RLM max backend calls",
        description="RLM: backend calls per run, sub-calls included (default 50); the next one is refused.",
    )

    @field_validator("max_output_tokens")
    @classmethod
    def _output_tokens_limit(cls, value):
        limit = settings.WORKFLOW_AGENT_MAX_OUTPUT_TOKENS_LIMIT
        if value is not None and value > limit:
            raise ValueError(f"at most {limit}")
        return value

    @field_validator("max_iterations")
    @classmethod
    def _iterations_limit(cls, value):
        limit = settings.WORKFLOW_AGENT_MAX_ITERATIONS_LIMIT
        if value is not None and value > limit:
            raise ValueError(f"at most {limit}")
        return value


# --- hooks ------------------------------------------------------------------------------------------------


def _todos_reset(workflow, node: dict, *, policy_context: ResetContext) -> int:
    return todos_clear(workflow=workflow, node_id=node["id"])


def _todos_tool_call(call) -> dict:
    return todos_tool(workflow=call.workflow, node_id=call.node_id, arguments=call.arguments)


def _todos_schema() -> dict:
    return todos_tool_schema()


def _agent_tool_name(node: dict) -> str:
    params = node.get("params") if isinstance(node.get("params"), dict) else {}
    return tool_slug(params.get("name"), fallback="agent")


CHAT_TRIGGER = NodeSpec(
    type="chatTrigger",
    label="Chat trigger",
    params_model=NoParams,
    outputs=(Handle("output-main", KIND_MAIN, max_connections=1, label="message"),),
    capabilities=frozenset({IS_TRIGGER}),
    description="Where the owner's chat message enters; its output picks the answering agent.",
)

AGENT = NodeSpec(
    type="agent",
    label="Agent",
    params_model=AgentParams,
    inputs=(
        Handle("input-main", KIND_MAIN, label="message"),
        Handle("input-context", KIND_CONTEXT, max_connections=1, label="context"),
        Handle("input-tools", KIND_TOOL, label="tools"),
    ),
    outputs=(Handle("output-tool", KIND_TOOL, label="teammate"),),
    capabilities=frozenset({REQUIRES_CONTEXT, IS_AGENT}),
    new_params={"name": "Agent", "provider": "offline", "model": "offline-echo", "system_prompt": ""},
    tool_name=_agent_tool_name,
    legacy_inputs=("input-memory",),
    description="An LLM agent. Wired into another agent's tools it becomes a teammate.",
)

CONTEXT = NodeSpec(
    type="context",
    label="Context",
    params_model=NoParams,
    outputs=(Handle("output-context", KIND_CONTEXT, max_connections=1, label="context"),),
    capabilities=frozenset({IS_CONTEXT_PANEL, SYSTEM_MANAGED}),
    description="Opts the agent it feeds into a stored conversation.",
)

TODOS = NodeSpec(
    type="todos",
    label="Todos",
    params_model=NoParams,
    outputs=(Handle("output-tool", KIND_TOOL, label="tool"),),
    tool_name="todos",
    tool_schema=_todos_schema,
    tool_call=_todos_tool_call,
    reset_execution_state=_todos_reset,
    description="A small checklist the model keeps through the `todos` tool.",
)

BUILTIN_SPECS = (CHAT_TRIGGER, AGENT, CONTEXT, TODOS)
