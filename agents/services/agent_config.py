"""An agent's settings as a firing runs with them: its node's params with the site's defaults filled in."""

from __future__ import annotations

from django.conf import settings


def agent_config_of(node: dict) -> dict:
    params = node.get("params") or {}
    return {
        "name": params.get("name") or node["id"],
        "provider": params.get("provider") or "offline",
        "model": params.get("model") or "offline-echo",
        "system_prompt": params.get("system_prompt") or "",
        "temperature": params.get("temperature"),
        "temperature_confirmed": bool(params.get("temperature_confirmed")),
        "max_output_tokens": params.get("max_output_tokens"),
        "thinking": params.get("thinking"),
        "max_iterations": params.get("max_iterations") or settings.AGENT_MAX_ITERATIONS,
        "max_wall_seconds": params.get("max_wall_seconds") or settings.AGENT_MAX_WALL_SECONDS,
        "max_tokens_per_firing": params.get("max_tokens_per_firing") or settings.AGENT_MAX_TOKENS_PER_FIRING,
        "compaction_threshold": params.get("compaction_threshold") or settings.AGENT_COMPACTION_THRESHOLD,
        "runtime_tools": params.get("runtime_tools") or [],  # agent runtimes: the built-in tools allowed
        "runtime_params": _runtime_params(params),
    }


def _runtime_params(params: dict) -> dict:
    """An agent runtime's own params, as RuntimeRun.params carries them: RLM's backend and limits (its `rlm_` params,
    unprefixed), else where a Vertex agent lives (project, location, agent, environment)."""
    if params.get("provider") == "rlm":
        return {k.removeprefix("rlm_"): v for k, v in params.items() if k.startswith("rlm_")}
    return {k: params[k] for k in ("project", "location", "agent", "environment") if params.get(k)}
