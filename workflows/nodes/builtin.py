"""The node types workflows itself owns: the chat trigger, the agent, the Context and the todos list.

Registered by `WorkflowsConfig.ready()` (after every model is loaded); a type another app owns is registered by that
app's `ready()` (the Memory node: `memory/node.py`), so this module names no higher app."""

from __future__ import annotations

from typing import Annotated, Literal

from django.conf import settings
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from core.text import is_invisible_text

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


def _visible(value: str) -> str:
    if value and is_invisible_text(value):
        raise ValueError(
            "is made only of invisible or direction-changing characters (such as zero-width spaces or a "
            "right-to-left override): use visible characters"
        )
    return value


class NoParams(BaseModel):
    model_config = ConfigDict(extra="forbid")


# Hints for the editor's form (static/js/schema_form.js): `x-providers` shows a field only for those providers,
# `x-advanced` folds it under "More settings". Help texts are written for the owner, not for the design record.
_ADVANCED = {"x-advanced": True}
_RUNTIMES = {"x-providers": ["claude_code", "codex_cli"], "x-advanced": True}
_VERTEX = {"x-providers": ["vertex_agent"]}
_GEMINI_ADVANCED = {"x-providers": ["gemini"], "x-advanced": True}
_RLM = {"x-providers": ["rlm"], "x-advanced": True}


class AgentParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Annotated[str, Field(min_length=1), _bounded("WORKFLOW_AGENT_NAME_MAX_CHARS"), AfterValidator(_visible)] = (
        "Agent"
    )
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
            "Which service answers. OpenAI, Anthropic and Gemini use your key (or the server's); "
            "OpenAI-compatible is a server such as Ollama or vLLM; offline answers without any network, for trying "
            "things out; Claude Code, Codex CLI, Vertex agent and RLM run a coding agent for each answer. What "
            "each keeps of the conversation (its fidelity): Claude Code keeps everything it shows and resumes its "
            "own session; Codex CLI and RLM keep what they show, each answer starting afresh; Vertex agent keeps "
            "everything it shows, and Google keeps the session."
        ),
    )
    # `x-widget` tells the editor to offer the provider's models from the catalogue (/api/node-types/).
    model: Annotated[
        str,
        Field(min_length=1, json_schema_extra={"x-widget": "model", "x-provider-field": "provider"}),
        _bounded("WORKFLOW_AGENT_MODEL_MAX_CHARS"),
    ]
    system_prompt: Annotated[
        str,
        Field(
            title="Instructions",
            description="What the agent should know and how it should behave, in your words.",
            json_schema_extra={"x-widget": "textarea"},
        ),
        _bounded("WORKFLOW_AGENT_SYSTEM_PROMPT_MAX_CHARS"),
    ] = ""
    temperature: Annotated[float, Field(ge=0, le=2)] | None = Field(
        None,
        description="Lower is steadier, higher is more varied. Empty: the model's default.",
        json_schema_extra=_ADVANCED,
    )
    temperature_confirmed: bool | None = Field(
        None,
        title="Send this temperature to Gemini 3",
        description=(
            "Gemini 3 and later: Google recommends keeping these models at their default temperature of 1.0 "
            "(lower values can make them loop or answer worse), so the temperature above is sent to them only "
            "when this is checked."
        ),
        # Only the Gemini adapter reads it (catalogue `temperature_confirm`): other providers' forms leave it out.
        json_schema_extra=_GEMINI_ADVANCED,
    )
    max_output_tokens: Annotated[int, Field(ge=1)] | None = Field(
        None,
        title="Longest answer (tokens)",
        description="Empty: the model's default.",
        json_schema_extra=_ADVANCED,
    )
    thinking: Literal["off", "low", "medium", "high"] | None = Field(
        None,
        description="How much the model reasons before answering, for models that can.",
        json_schema_extra=_ADVANCED,
    )
    max_iterations: Annotated[int, Field(ge=1)] | None = Field(
        None,
        title="Most tool steps per answer",
        description="Empty: the server's limit.",
        json_schema_extra=_ADVANCED,
    )
    compaction_threshold: Annotated[float, Field(ge=0.1, le=0.95)] | None = Field(
        None,
        title="Summarize when the context is this full",
        description="A share of the model's context window, e.g. 0.8. Empty: the server's default.",
        json_schema_extra=_ADVANCED,
    )
    # Agent runtimes only: the CLI's built-in tools the agent may use (e.g. "Read", "Grep"). Empty, the default:
    # none, so no shell command and no file write.
    runtime_tools: list[Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z][A-Za-z0-9_]*$")]] = (
        Field(
            default=[],
            max_length=50,
            title="Built-in tools allowed",
            description="The coding agent's own tools it may use, e.g. Read. Empty: none (no shell, no file writes).",
            json_schema_extra=_RUNTIMES,
        )
    )

    # Vertex managed agent (provider vertex_agent) only: where the agent lives and which sandbox it works in.
    project: Annotated[str, Field(max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9-:.]*$")] | None = Field(
        None, description="The Google Cloud project the agent runs in.", json_schema_extra=_VERTEX
    )
    location: Annotated[str, Field(max_length=50, pattern=r"^[A-Za-z0-9-]+$")] | None = Field(
        None,
        description="The Google Cloud location. Empty: global.",
        json_schema_extra={**_VERTEX, "x-advanced": True},
    )
    agent: Annotated[str, Field(max_length=300, pattern=r"^[A-Za-z0-9][A-Za-z0-9._/-]*$")] | None = Field(
        None,
        description="The Vertex agent that answers: a managed agent's id or your own agent's name.",
        json_schema_extra=_VERTEX,
    )
    environment: Annotated[str, Field(max_length=200, pattern=r"^[A-Za-z0-9][A-Za-z0-9._/-]*$")] | None = Field(
        None,
        description=(
            "Where the agent works. Empty: a new sandbox for each conversation, kept by Google. Or the id of one "
            "you set up."
        ),
        json_schema_extra={**_VERTEX, "x-advanced": True},
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
        description="Which service runs the model. Empty: OpenAI.",
        json_schema_extra={"x-providers": ["rlm"]},
    )
    rlm_max_iterations: Annotated[int, Field(ge=1, le=50)] | None = Field(
        None, title="RLM max iterations", description="Rounds per answer. Empty: 10.", json_schema_extra=_RLM
    )
    rlm_timeout_seconds: Annotated[int, Field(ge=5, le=3600)] | None = Field(
        None,
        title="RLM timeout (seconds)",
        description="How long one answer may take. Empty: 300 seconds.",
        json_schema_extra=_RLM,
    )
    rlm_max_depth: Annotated[int, Field(ge=1, le=3)] | None = Field(
        None,
        title="RLM sub-call depth",
        description="How deep it may hand questions to itself. Empty: 1 (no nesting).",
        json_schema_extra=_RLM,
    )
    rlm_max_llm_calls: Annotated[int, Field(ge=1, le=500)] | None = Field(
        None,
        title="RLM max backend calls",
        description="Model calls per answer, nested ones included. Empty: 50.",
        json_schema_extra=_RLM,
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
