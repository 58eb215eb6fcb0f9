"""One vertex_agent firing: the interactions it creates (continuing the bound one, or a new one from the record),
the function rounds the project's tools answer, and Stop and the deadline ending the stream at once."""

from __future__ import annotations

import logging
import tempfile
import time
from pathlib import Path

from ...adapters.common import Stream
from ...attachments import FilePlan
from ...errors import ServerError, TruncatedStreamError
from ...types import ChatRequest, ChatResult
from .. import RuntimeRun, files_of, handoff_prompt, new_message_files, split_request
from .client import make_client, map_error
from .collector import Collector
from .params import PROVIDER, VertexParams

MAX_FUNCTION_ROUNDS = 16  # function_call -> function_result continuations inside one firing
logger = logging.getLogger("providers.vertex_agent")

# Statuses that end an interaction as a failure.
_FAILED = ("failed", "cancelled")


def function_declarations(run: RuntimeRun) -> list[dict]:
    return [
        {
            "type": "function",
            "name": tool.definition.name,
            "description": tool.definition.description,
            "parameters": tool.definition.parameters,
        }
        for tool in run.tools
    ]


# The Interactions API's document content takes these types (PDF, CSV, office documents); other text files go as text.
DOCUMENT_TYPES = ("application/pdf", "text/csv")


def with_files(prompt: str, blocks: list[dict], plan: FilePlan) -> object:
    """The interaction input: the prompt alone, or the prompt then each file as the Interactions API documents it
    (an `image` or `document` content with base64 `data` and its `mime_type`; other text files as text)."""
    if not blocks:
        return prompt
    contents: list[dict] = [{"type": "text", "text": prompt}]
    for block in blocks:
        prepared = plan[block]
        if prepared.form != "native":
            contents.append({"type": "text", "text": prepared.as_text()})
        elif prepared.kind == "image":
            contents.append({"type": "image", "data": prepared.b64(), "mime_type": prepared.media_type})
        elif prepared.media_type in DOCUMENT_TYPES:
            contents.append({"type": "document", "data": prepared.b64(), "mime_type": prepared.media_type})
        else:
            text = prepared.data.decode("utf-8", errors="replace")
            framed = f'[file "{prepared.name}"]\n{text}\n[end of file "{prepared.name}"]'
            contents.append({"type": "text", "text": framed})
    return contents


def chat(request: ChatRequest, stream) -> ChatResult:
    run: RuntimeRun = request.runtime or RuntimeRun(home=Path(tempfile.gettempdir()))
    params = VertexParams.of(run.params)
    system, history, user_text = split_request(request.messages)
    resume = run.resume or None
    deadline = time.monotonic() + run.wall_seconds
    client = make_client(request, params, wall_seconds=run.wall_seconds)
    collector = Collector(stream)
    note = None
    plan = FilePlan(PROVIDER, request.model, request.messages)
    # A continued interaction holds the earlier files already: only the new message's go; a new one gets them all.
    all_files = files_of(request.messages)
    if resume:
        previous = resume["interaction_id"]
        # A pinned environment stays pinned; "remote" keeps the sandbox the bound interaction used.
        environment = params.environment if params.environment != "remote" else resume.get("environment_id") or "remote"
        first_input: object = with_files(user_text, new_message_files(request.messages), plan)
    else:
        previous = None
        environment = params.environment
        first_input = with_files(handoff_prompt(history, user_text), all_files, plan)
        if history:
            note = "A new interaction started from a portable transcript of the stored conversation."
    tools = function_declarations(run)
    by_name = {tool.definition.name: tool for tool in run.tools}
    next_input = first_input
    rounds = 0
    timed_out = False
    while True:
        kwargs: dict = {"agent": params.agent, "input": next_input, "stream": True, "environment": environment}
        if previous:
            kwargs["previous_interaction_id"] = previous
        if system:
            kwargs["system_instruction"] = system  # turn-scoped on Google's side: sent with every interaction
        if tools:
            kwargs["tools"] = tools
        try:
            events = client.interactions.create(**kwargs)
        except Exception as exc:
            error = map_error(exc)
            if resume and rounds == 0 and previous == resume["interaction_id"] and error.status == 404:
                # Google no longer has the bound interaction (its retention, not ours): start over from the record,
                # and say so. Nothing was billed for the refused call.
                note = (
                    f"The interaction {previous} could not be continued: Google no longer has it (404). A new "
                    "interaction started from a portable transcript of the stored conversation."
                )
                logger.warning("vertex interaction gone", extra={"interaction_id": previous})
                previous, resume = None, None
                environment = params.environment
                next_input = with_files(handoff_prompt(history, user_text, note=note), all_files, plan)
                continue
            raise error from exc
        collector.begin()
        # Stop, or the firing's deadline, ends the read at once (the pump polls both while Google is silent).
        pumping = Stream(None, lambda: stream.stopped() or time.monotonic() >= deadline)
        try:
            for event in pumping.pump(events, close=getattr(events, "close", None)):
                collector.add(_as_dict(event))
        except Exception as exc:
            raise map_error(exc) from exc
        if pumping.stop_requested:
            stream.stop_requested = True
            timed_out = not stream.stopped()
            break
        if collector.error is not None:
            raise ServerError(f"{PROVIDER}: {collector.error}", provider=PROVIDER)
        if collector.status is None:
            raise TruncatedStreamError(f"{PROVIDER}: the stream ended without interaction.completed", provider=PROVIDER)
        if collector.status in _FAILED:
            raise ServerError(f"{PROVIDER}: the interaction {collector.status}", provider=PROVIDER)
        if collector.status != "requires_action":
            break
        calls = collector.pending_calls()
        rounds += 1
        if not calls or rounds > MAX_FUNCTION_ROUNDS or time.monotonic() >= deadline:
            break
        if environment == "remote" and not collector.environment_id:
            # Continue in the sandbox this interaction ran in, not a new one: read its id when the stream lacked it.
            collector.environment_id = _environment_of(client, collector.interaction_id)
        environment = collector.environment_id or environment
        next_input = [collector.answer(call, by_name) for call in calls]
        previous = collector.interaction_id
        if stream.stopped():
            stream.stop_requested = True
            break
    stopped = stream.stop_requested
    if not collector.environment_id and environment != "remote":
        collector.environment_id = environment  # the interaction ran where it was told to
    if not stopped and not collector.environment_id and collector.interaction_id:
        # Stream snapshots need not carry environment_id (it is not a declared field of them): read the resource.
        collector.environment_id = _environment_of(client, collector.interaction_id)
    return collector.finish(
        request,
        continued_from=(resume or {}).get("interaction_id"),
        note=note,
        stopped=stopped,
        timed_out=timed_out,
        params=params,
    )


def _environment_of(client, interaction_id: str | None) -> str | None:
    if not interaction_id:
        return None
    try:
        return client.interactions.get(interaction_id).environment_id
    except Exception:  # the answer is still good; only the next firing's sandbox is unknown (it gets a new one)
        logger.warning("vertex environment id unreadable", extra={"interaction_id": interaction_id})
        return None


def _as_dict(event) -> dict:
    if isinstance(event, dict):
        return event
    # by_alias + json mode: exactly the wire field names, extra fields included (kept as observed).
    return event.model_dump(mode="json", by_alias=True, exclude_none=True)
