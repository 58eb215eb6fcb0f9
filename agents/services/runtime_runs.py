"""What a firing gives an agent runtime (providers/runtimes/) and keeps from it: the seam between the two.

Before the call, `runtime_run_attach` puts a `RuntimeRun` on the request: this conversation's runtime directory,
the session binding when it still matches the stored conversation, the project's tools as callables, the owner's
built-in tool allowlist and the time left. After the answer is saved, `runtime_binding_record` keeps the session
the run used (Claude Code), with the stored conversation's cursor it now matches. Everything else is the common
path: the step stores `ChatResult.observed` (every message of the run) and runs none of their tool calls.
"""

from __future__ import annotations

import logging
from decimal import Decimal
from pathlib import Path

from django.db import connections
from django.utils import timezone

from agents.models import Firing, LlmStep
from agents.services.firings import firing_key
from agents.services.heartbeat import stop_checker
from agents.services.runtime_approvals import runtime_call_decision
from agents.services.runtime_paths import conversation_runtime_home, firing_runtime_home
from agents.services.teammates import teammate_call_in_thread
from agents.tools import prepare_tool_calls, run_remote_tool, run_tool
from conversations import store
from conversations.selectors import owner_tool_result_max_chars, runtime_interaction_point, runtime_session_binding
from conversations.services import runtime_interaction_point_record, runtime_session_binding_record
from provider_keys.selectors import owner_request_overrides
from providers.runtimes import RuntimeRun, RuntimeTool
from providers.types import RUNTIMES, ToolDefinition

logger = logging.getLogger("agents.runtime")

RESUMABLE = ("claude_code", "vertex_agent")

# Runtimes whose binding is kept per stored cursor (a rewind continues from the point it returns to).
POINTED = ("vertex_agent",)


def is_runtime(firing: Firing) -> bool:
    return (firing.agent_config or {}).get("provider") in RUNTIMES


def runtime_home(firing: Firing) -> Path:
    provider = firing.agent_config["provider"]
    if firing.uses_conversation:
        key = firing_key(firing)
        return conversation_runtime_home(provider, key.workflow_id, key.generation, key.agent_node_id)
    return firing_runtime_home(provider, firing.pk)  # no Context: nothing continues, nothing is resumed


def _binding_for(firing: Firing) -> dict | None:
    """The session to resume: only when the stored list the firing extends is exactly what that session saw."""
    prefix = firing.stored_prefix or {}
    if not firing.uses_conversation or "length" not in prefix:
        return None
    key = firing_key(firing)
    if firing.agent_config["provider"] in POINTED:
        return _point_for(firing, key, prefix)
    binding = runtime_session_binding(key)
    if binding is None or binding.runtime != firing.agent_config["provider"]:
        return None
    if binding.cursor_length != prefix["length"] or binding.cursor_digest != prefix["digest"]:
        # The stored conversation moved on without this session (cleared, rewound, compacted, a save that failed):
        # the session would continue from something the owner no longer has. A new one starts from the record.
        return None
    return {
        "session_id": binding.session_id,
        "transcript_path": binding.transcript_path,
        "session_cost_usd": float(binding.session_cost_usd),
    }


def _point_for(firing: Firing, key, prefix: dict) -> dict | None:
    """The interaction recorded at exactly the stored cursor the firing extends (the latest turn's, or an earlier
    one a branch move rewound to), or None: then a new interaction starts from the record."""
    point = runtime_interaction_point(
        key,
        runtime=firing.agent_config["provider"],
        agent_ref=agent_ref(firing),
        cursor_length=prefix["length"],
        cursor_digest=prefix["digest"],
    )
    if point is None:
        return None
    return {"interaction_id": point.interaction_id, "environment_id": point.environment_id}


def agent_ref(firing: Firing) -> str:
    """Which remote agent a binding belongs to (Vertex: project/location/agent), as the firing's params name it."""
    params = firing.agent_config.get("runtime_params") or {}
    return "/".join(str(params.get(k) or "") for k in ("project", "location", "agent"))


def _project_tool(firing: Firing, binding: dict):
    def call(arguments: dict, call_id: str) -> tuple[str, bool]:
        # Runs on a thread of the runtime's event loop, while the CLI waits for the answer: its own connection,
        # closed after, and the same tool contract (and receipt key per call) as a native tool call.
        tool_call = {"id": call_id, "name": binding["name"], "arguments": arguments}
        try:
            if binding.get("approval"):
                # A run cannot be parked between its own tool calls: this thread waits for the owner's decision
                # while the run waits for the tool (agents/services/runtime_approvals.py).
                declined = runtime_call_decision(firing, binding, tool_call)
                if declined is not None:
                    return declined.content, True
            if binding.get("remote"):
                # An MCP server's tool: one attempt inside the run's one step (never re-sent, like the step).
                outcome = run_remote_tool(
                    firing=firing, binding=binding, call=tool_call, should_stop=stop_checker(firing.pk)
                )
            else:
                prepare_tool_calls(firing=firing, message={"blocks": [{"type": "tool_call", **tool_call}]})
                outcome = run_tool(firing=firing, binding=binding, call=tool_call)
            cap = owner_tool_result_max_chars(firing.workflow.owner_id)
            return store.cap_tool_result(outcome.content, cap), outcome.is_error
        finally:
            connections.close_all()

    return RuntimeTool(ToolDefinition(binding["name"], binding["description"], binding["parameters"]), call)


def _teammate_tool(firing: Firing, binding: dict):
    def call(arguments: dict, call_id: str) -> tuple[str, bool]:
        return teammate_call_in_thread(firing=firing, binding=binding, arguments=arguments, call_id=call_id)

    return RuntimeTool(ToolDefinition(binding["name"], binding["description"], binding["parameters"]), call)


def runtime_run_attach(firing: Firing, request) -> None:
    """Put the RuntimeRun on `request` when the agent's provider is a runtime (a no-op otherwise)."""
    if not is_runtime(firing):
        return
    left = (firing.deadline_at - timezone.now()).total_seconds() if firing.deadline_at else 600.0
    params = dict(firing.agent_config.get("runtime_params") or {})
    if firing.agent_config["provider"] == "rlm":
        _use_backend_key(firing, request, params.get("backend") or "openai")
    request.runtime = RuntimeRun(
        home=runtime_home(firing),
        resume=_binding_for(firing) if firing.agent_config["provider"] in RESUMABLE else None,
        # Teammates too: the run waits for a teammate's answer while its firing runs in the tool's thread
        # (agents/services/teammates.py), since a CLI run cannot be parked between steps like a native one.
        tools=[
            _teammate_tool(firing, b) if b["is_teammate"] else _project_tool(firing, b) for b in firing.tool_bindings
        ],
        allowed_builtin_tools=list(firing.agent_config.get("runtime_tools") or []),
        wall_seconds=max(left, 1.0),
        params=params,
    )


def summary_provider(config: dict) -> str:
    """The provider a compaction summary of this agent's conversation is asked of: RLM's backend (a summary is one
    plain completion; nothing about it needs the sandbox), else the agent's own provider."""
    if config.get("provider") == "rlm":
        return (config.get("runtime_params") or {}).get("backend") or "openai"
    return config.get("provider") or "offline"


def _use_backend_key(firing: Firing, request, backend: str) -> None:
    """RLM calls its backend (OpenAI or an OpenAI-compatible server) from the worker: the owner's key for that
    backend when they stored one, else the environment's (providers.config)."""
    overrides = owner_request_overrides(owner_id=firing.workflow.owner_id, provider=backend)
    request.api_key = overrides.get("api_key")
    request.base_url = overrides.get("base_url")
    request.url_policy = overrides.get("url_policy")


def runtime_binding_record(firing: Firing, step: LlmStep) -> None:
    """After a runtime's messages were saved: keep its session as this conversation's binding (Claude Code)."""
    if firing.agent_config.get("provider") not in RESUMABLE or not firing.uses_conversation:
        return
    if (step.result or {}).get("stop_reason") == "stopped":
        # Killed mid-run: the session's transcript ends somewhere before what was saved (the partial answer), so it
        # no longer matches the record; the next firing starts from the record.
        return
    ids = (step.result or {}).get("provider_ids") or {}
    prefix = firing.stored_prefix or {}
    if (
        not (ids.get("session_id") or ids.get("interaction_id"))
        or "length" not in prefix
        or prefix.get("detached")
        or firing.pending_messages
    ):
        return  # not saved (or saved over by someone else): the next firing starts from the record instead
    key = firing_key(firing)
    if firing.agent_config["provider"] in POINTED:
        _point_record(firing, key, prefix, ids)
        return
    runtime_session_binding_record(
        key=key,
        runtime=firing.agent_config["provider"],
        session_id=ids["session_id"],
        transcript_path=ids.get("transcript_path") or "",
        cursor_length=prefix["length"],
        cursor_digest=prefix["digest"],
        session_cost_usd=Decimal(str(ids.get("session_cost_usd") or 0)),
    )


def _point_record(firing: Firing, key, prefix: dict, ids: dict) -> None:
    """Keep which interaction (and environment) the stored list's new cursor continues from."""
    if ids.get("status") not in ("completed", "incomplete", "budget_exceeded"):
        # Ended waiting for a function result nobody sent (a round limit, the deadline): that interaction cannot
        # take a new message, so the next firing starts from the record.
        return
    point = runtime_interaction_point_record(
        key=key,
        runtime=firing.agent_config["provider"],
        agent_ref=agent_ref(firing),
        cursor_length=prefix["length"],
        cursor_digest=prefix["digest"],
        interaction_id=ids["interaction_id"],
        environment_id=ids.get("environment_id") or "",
    )
    if point is None:  # a concurrent save of the same point: the other one is just as right
        logger.info("interaction point recorded twice", extra={"firing_id": str(firing.pk)})
