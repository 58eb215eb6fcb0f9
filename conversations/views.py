"""The Context panel page: the live generation's conversation of the agent a Context node serves."""

from __future__ import annotations

from datetime import datetime

from django.contrib import messages as flash
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from core.errors import NotFoundError
from providers import capabilities
from providers.context import pressure_method_note
from providers.errors import ProviderError
from workflows.selectors import access_workflow

from . import selectors
from .estimates import latest_model_of, next_turn_estimate, usd
from .services import conversation_context_clear

PAGE_MESSAGES = 200


def _workflow_or_404(request, workflow_id):
    try:
        return access_workflow(user=request.user, workflow_id=workflow_id)
    except NotFoundError:
        raise Http404("Workflow not found.") from None


def _pick_target(workflow, node_id: str | None):
    targets = selectors.live_context_targets(workflow)
    if node_id:
        chosen = next((t for t in targets if t.context_node_id == node_id), None)
        if chosen is None:
            raise Http404("No such Context node in the live generation.")
        return targets, chosen
    return targets, next((t for t in targets if t.agent_node_id), targets[0] if targets else None)


def _model_notes(provider: str, model: str) -> dict:
    """How the panel's pressure is measured for this agent's provider, and whether its model is unknown to the
    catalogue (conservative capabilities, no price)."""

    try:
        note = capabilities(provider, model).note
    except ProviderError:
        note = ""
    return {"pressure_note": pressure_method_note(provider), "model_note": note}


def _view_block(block) -> dict:
    kind = block.get("type") if isinstance(block, dict) else None
    view = {"kind": kind or "unknown", "block": block}
    if kind == "tool_call":
        view["json"] = selectors.pretty_json(
            block.get("arguments") if block.get("arguments") is not None else block.get("arguments_raw")
        )
    elif kind not in {"text", "tool_result", "thinking", "redacted_thinking", "image"}:
        view["kind"] = "unknown"
        view["json"] = selectors.pretty_json(block)
    return view


ROLE_WORDS = {"system": "Instructions", "user": "User", "assistant": "Agent", "tool": "Tool result"}


def _when(value):
    """A stored ISO time as an aware datetime (templates show it in words; a script shows it in local time)."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _view_message(position: int, message: dict) -> dict:
    role = message.get("role", "unknown")
    return {
        "position": position,
        "number": position + 1,
        "role": role,
        "role_words": ROLE_WORDS.get(role, role),
        "ts": message.get("ts"),
        "when": _when(message.get("ts")),
        "usage": message.get("usage"),
        "blocks": [_view_block(b) for b in message.get("blocks", [])],
        # What the provider adapter had to say about this message in plain words (a refusal, a blocked prompt,
        # reasoning summaries off for the key, reasoning dropped after a model change): providers/README.md.
        "notes": [n for n in ((message.get("meta") or {}).get("notes") or []) if isinstance(n, str)],
    }


def tokens_short(count: int | None) -> str:
    """32000 -> "32k", 1048576 -> "1M": how people name a model's window."""
    if not count:
        return "?"
    if count >= 1_000_000:
        return f"{count / 1_000_000:.3g}M"
    if count >= 1000:
        return f"{count / 1000:.3g}k"
    return str(count)


def pressure_words(pressure: dict) -> str:
    """The gauge in a sentence: how full the model's window is with what the agent keeps, plus room to answer."""
    kept = pressure["input_tokens"]
    room = pressure["output_headroom_tokens"]
    window = pressure["context_window_tokens"]
    answer = f", plus up to {room:,} tokens kept free for the answer" if room else ""
    # The one count the page gives: what the provider counted for the last answer's request (the instructions and
    # tool descriptions included), not an estimate from the stored size.
    kept_words = f"the conversation is {kept:,} tokens (as counted for the last answer)"
    if not window:
        return f"{kept_words[0].upper()}{kept_words[1:]}{answer}. The model's window size is not known."
    percent = pressure["fraction"] * 100
    shown = f"{percent:.0f} %" if percent >= 1 else "under 1 %"
    return (
        f"{shown} of the model's {tokens_short(window)} window: {kept_words}{answer}. "
        "Near 100 % the oldest turns are summarized to make room."
    )


@login_required
@require_GET
def context_panel(request, workflow_id: int):
    workflow = _workflow_or_404(request, workflow_id)
    targets, target = _pick_target(workflow, request.GET.get("node"))
    tab = "raw" if request.GET.get("tab") == "raw" else "messages"
    header = (
        selectors.live_conversation_header(workflow, target.agent_node_id) if target and target.agent_node_id else None
    )
    try:
        offset = max(0, int(request.GET.get("offset", 0)))
    except ValueError:
        offset = 0
    rows = selectors.conversation_message_rows(header, offset=offset, limit=PAGE_MESSAGES) if header else []
    context = {
        "workflow": workflow,
        "targets": targets,
        "target": target,
        "tab": tab,
        "header": header,
        "wires": [_view_message(r["position"], r["message"]) for r in rows],
        "raw": selectors.pretty_json([r["message"] for r in rows]) if tab == "raw" else "",
        "offset": offset,
        "next_offset": offset + PAGE_MESSAGES if header and offset + PAGE_MESSAGES < header.message_count else None,
        "previous_offset": max(0, offset - PAGE_MESSAGES) if offset else None,
        "usage": selectors.usage_totals(
            workflow_id=workflow.pk, generation=workflow.live_generation, agent_node_id=target.agent_node_id
        )
        if target and target.agent_node_id
        else None,
        "pressure": selectors.pressure_of(header),
    }
    model = selectors.agent_model(workflow, target.agent_node_id) if target and target.agent_node_id else None
    # What this agent's conversation keeps beyond its messages (providers/README.md#fidelity), as the agent's form
    # says it.
    agent_node_id = target.agent_node_id if target else None
    context["runtime"] = selectors.agent_runtime(workflow, agent_node_id) if agent_node_id else None
    if model is not None:
        context.update(_model_notes(*model))
    # Provenance hook: the next turn's expected cost beside the gauge (the chat's request view uses the same).
    context["next_turn"] = _next_turn(workflow, header, model, context["pressure"])
    if context["pressure"] and context["pressure"]["fraction"] is not None:
        context["pressure_percent"] = min(100, round(context["pressure"]["fraction"] * 100))
    if context["pressure"]:
        context["pressure_words"] = pressure_words(context["pressure"])
    if target and target.agent_node_id:
        context["compaction"] = selectors.compaction_of(workflow, target.agent_node_id)
        key = {
            "workflow_id": workflow.pk,
            "generation": workflow.live_generation,
            "agent_node_id": target.agent_node_id,
        }
        context["charts"] = {
            "window": (context["pressure"] or {}).get("context_window_tokens"),
            "calls": selectors.usage_series(**key),
            "days": selectors.usage_per_day(**key),
        }
    return render(request, "conversations/context_panel.html", context)


def _next_turn(workflow, header, model: tuple[str, str] | None, pressure: dict | None = None) -> dict | None:
    """At the price of the agent's model as configured now; without one, the model it last called. The token count
    is the gauge's (what the provider counted at the last answer) when there is one: one count on the page."""

    if header is None or not header.message_count:
        return None
    model = model or latest_model_of(
        workflow_id=workflow.pk, generation=header.generation, agent_node_id=header.agent_node_id
    )
    if model is None:
        return None
    estimate = next_turn_estimate(
        size_bytes=header.size_bytes,
        provider=model[0],
        model=model[1],
        measured_tokens=(pressure or {}).get("input_tokens"),
    )
    if estimate is not None:
        estimate["cost_text"] = usd(estimate["cost"])
        estimate["cost_if_cached_text"] = usd(estimate["cost_if_cached"])
    return estimate


@login_required
@require_POST
def context_panel_clear(request, workflow_id: int):
    workflow = _workflow_or_404(request, workflow_id)
    _, target = _pick_target(workflow, request.POST.get("node"))
    if target is None or not target.agent_node_id or not workflow.live_generation:
        raise Http404("Nothing to clear.")
    deleted = conversation_context_clear(workflow=workflow, agent_node_id=target.agent_node_id)
    flash.success(request, "Context cleared." if deleted else "The Context was already empty.")
    return redirect(f"{reverse('conversations:context-panel', args=[workflow.pk])}?node={target.context_node_id}")
