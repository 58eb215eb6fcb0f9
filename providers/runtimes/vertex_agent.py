"""A Vertex managed agent as an agent provider (provider "vertex_agent"): one firing = one interaction.

The Interactions API (google-genai in Vertex mode, `client.interactions.create(agent=..., stream=True)`) runs the
agent's own tool loop on Google's side. Fidelity: exact observable events plus interaction/environment binding.
Every streamed step (thoughts with their signatures, model output, server-side tool calls and their results,
function calls) comes back as MessageWire in `ChatResult.observed`, in order, and `step.delta` text streams to the
chat. Google keeps the interaction state server-side (`store` defaults to true on their side); we keep the events,
the last interaction id and the environment id, per stored cursor (agents/services/runtime_runs.py): the next
firing continues with `previous_interaction_id` only while the stored conversation is exactly what that
interaction saw, else it starts a new interaction from a portable transcript of the stored record.

The project's tools (memory, todos) are offered as function declarations: a `function_call` step ends the
interaction with status `requires_action`, the adapter answers it through the tool's contract and continues with a
new interaction whose input is the `function_result` steps (still one firing step, one provider call per
interaction, never a retry).
"""

from __future__ import annotations

import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from .. import config
from ..adapters.common import Stream
from ..errors import (
    AuthError,
    InvalidRequestError,
    NetworkError,
    ProviderError,
    RateLimitedError,
    ServerError,
    TruncatedStreamError,
    classify_status,
)
from ..types import ChatRequest, ChatResult, Usage
from ..wire import text_block, tool_call_block, tool_result_message
from . import RuntimeRun, handoff_prompt, split_request

PROVIDER = "vertex_agent"
SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)
GOOGLE_TOKEN_URI = "https://oauth2.googleapis.com/token"
MAX_FUNCTION_ROUNDS = 16  # function_call -> function_result continuations inside one firing
logger = logging.getLogger("providers.vertex_agent")

# Statuses an interaction can end a stream with, and what the firing makes of them.
_DONE = {"completed": "end_turn", "incomplete": "max_tokens", "budget_exceeded": "max_tokens"}
_FAILED = ("failed", "cancelled")


@dataclass(frozen=True)
class VertexParams:
    project: str
    location: str
    agent: str
    environment: str  # "remote" (a new sandbox, or the bound one) or a pinned environment id

    @classmethod
    def of(cls, params: dict | None) -> VertexParams:
        params = params or {}
        project = (params.get("project") or "").strip()
        location = (params.get("location") or "global").strip()
        agent = (params.get("agent") or "").strip()
        environment = (params.get("environment") or "remote").strip()
        if not project or not agent:
            raise InvalidRequestError(
                "a vertex_agent needs its Google Cloud project and the agent to talk to (params project, agent)",
                provider=PROVIDER,
            )
        return cls(project, location, agent, environment)


# --- credentials and client -----------------------------------------------------------------------------------


def _secret(request: ChatRequest) -> str | None:
    """The owner's stored key, else VERTEX_AGENT_CREDENTIALS, else the file GOOGLE_APPLICATION_CREDENTIALS names."""
    value = config.api_key_for(PROVIDER, request.api_key)
    if value:
        return value.strip()
    path = config.setting("GOOGLE_APPLICATION_CREDENTIALS")
    if path:
        try:
            with open(path, encoding="utf-8") as handle:
                return handle.read().strip()
        except OSError as exc:
            raise AuthError(f"GOOGLE_APPLICATION_CREDENTIALS cannot be read: {exc}", provider=PROVIDER) from None
    return None


def credentials_from(secret: str | None):
    """A service account JSON (its own token endpoint signs us in) or an OAuth access token. Never the metadata
    server or gcloud's defaults: a worker must not quietly act as whatever identity its host happens to have."""
    import google.oauth2.credentials
    from google.oauth2 import service_account

    if not secret:
        raise AuthError(
            "no Vertex credentials: store a service account JSON or an access token on the provider keys page, or "
            "set VERTEX_AGENT_CREDENTIALS",
            provider=PROVIDER,
        )
    if secret.startswith("{"):
        try:
            info = json.loads(secret)
        except ValueError:
            raise AuthError("the stored Vertex credentials are not valid JSON", provider=PROVIDER) from None
        if info.get("type") != "service_account":
            raise AuthError("Vertex credentials JSON must be a service account key", provider=PROVIDER)
        allowed = [u.strip() for u in str(config.setting("VERTEX_AGENT_TOKEN_URIS") or GOOGLE_TOKEN_URI).split(",")]
        if info.get("token_uri") not in allowed:
            # The key file names where it signs in; an owner's key must not make the server post to any URL.
            raise AuthError(
                f"the service account key's token_uri is not an allowed sign-in endpoint ({', '.join(allowed)})",
                provider=PROVIDER,
            )
        try:
            return service_account.Credentials.from_service_account_info(info, scopes=list(SCOPES))
        except (ValueError, KeyError) as exc:
            raise AuthError(f"the service account key is unusable: {exc}", provider=PROVIDER) from None
    return google.oauth2.credentials.Credentials(token=secret)


def make_client(request: ChatRequest, params: VertexParams, *, wall_seconds: float):
    from google import genai
    from google.genai import types

    credentials = credentials_from(_secret(request))
    base_url = config.base_url_for(PROVIDER, request.base_url)
    connect, read = config.timeouts()
    options = types.HttpOptions(
        base_url=base_url or None,
        timeout=int(min(connect + read, max(wall_seconds, 1.0)) * 1000),
        retry_options=types.HttpRetryOptions(attempts=1),  # one attempt: a retried interaction is billed twice
    )
    return genai.Client(
        vertexai=True,
        project=params.project,
        location=params.location,
        credentials=credentials,
        http_options=options,
    )


def map_error(exc: BaseException) -> ProviderError:
    from google.auth import exceptions as auth_exceptions
    from google.genai import _interactions_errors as errors

    if isinstance(exc, ProviderError):
        return exc
    if isinstance(exc, auth_exceptions.GoogleAuthError):
        return AuthError(f"{PROVIDER}: signing in failed: {exc}", provider=PROVIDER)
    if isinstance(exc, errors.APIStatusError):
        body = exc.body if isinstance(exc.body, dict) else {}
        detail = body.get("error") if isinstance(body.get("error"), dict) else body
        text = str((detail or {}).get("message") or exc.message or "error")
        status = int(exc.status_code)
        if status == 429:
            return RateLimitedError(f"{PROVIDER} returned 429: {text}", provider=PROVIDER, status=429)
        return classify_status(status, text, provider=PROVIDER)
    if isinstance(exc, errors.APIConnectionError | OSError):
        return NetworkError(f"{PROVIDER}: connection failed ({type(exc).__name__})", provider=PROVIDER)
    return ServerError(f"{PROVIDER}: unexpected {type(exc).__name__}: {exc}", provider=PROVIDER)


def check_credentials(request: ChatRequest) -> None:
    """Prove the stored credentials sign in: a service account gets an access token from its token endpoint (no
    interaction, nothing billed); an access token is taken as given (Google checks it on the first call)."""
    from google.auth.transport.requests import Request

    credentials = credentials_from(_secret(request))
    if getattr(credentials, "token", None) and not hasattr(credentials, "service_account_email"):
        return
    try:
        credentials.refresh(Request())
    except Exception as exc:
        raise map_error(exc) from exc


# --- one firing -------------------------------------------------------------------------------------------------


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


def chat(request: ChatRequest, stream) -> ChatResult:
    import tempfile
    from pathlib import Path

    run: RuntimeRun = request.runtime or RuntimeRun(home=Path(tempfile.gettempdir()))
    params = VertexParams.of(run.params)
    system, history, user_text = split_request(request.messages)
    resume = run.resume or None
    deadline = time.monotonic() + run.wall_seconds
    client = make_client(request, params, wall_seconds=run.wall_seconds)
    collector = _Collector(stream)
    note = None
    if resume:
        previous = resume["interaction_id"]
        # A pinned environment stays pinned; "remote" keeps the sandbox the bound interaction used.
        environment = params.environment if params.environment != "remote" else resume.get("environment_id") or "remote"
        first_input: object = user_text
    else:
        previous = None
        environment = params.environment
        first_input = handoff_prompt(history, user_text)
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
                next_input = handoff_prompt(history, user_text, note=note)
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


def _result_text(result) -> str:
    if isinstance(result, str):
        return result
    if isinstance(result, list) and all(isinstance(p, dict) and p.get("type") == "text" for p in result):
        return "".join(p.get("text", "") for p in result)
    return json.dumps(result, ensure_ascii=False)


class _Collector:
    """Turns the interactions' stream events into MessageWire as they arrive (steps keyed by their index)."""

    def __init__(self, stream) -> None:
        self.stream = stream
        self.observed: list[dict] = []
        self.interaction_ids: list[str] = []
        self.interaction_id: str | None = None
        self.environment_id: str | None = None
        self.status: str | None = None
        self.error: str | None = None
        self.usage: dict[str, int] = {}
        self.usage_seen = False
        self.call_names: dict[str, str] = {}
        self._steps: dict[int, dict] = {}
        self._calls: list[dict] = []  # function calls of the current interaction, in order

    def begin(self) -> None:
        self.status = None
        self.error = None
        self._steps = {}
        self._calls = []

    def _assistant(self) -> dict:
        last = self.observed[-1] if self.observed else None
        if last is None or last["role"] != "assistant":
            last = {"role": "assistant", "blocks": []}
            self.observed.append(last)
        return last

    def _snapshot(self, interaction: dict) -> None:
        if interaction.get("id"):
            self.interaction_id = interaction["id"]
            if interaction["id"] not in self.interaction_ids:
                self.interaction_ids.append(interaction["id"])
        if interaction.get("environment_id"):
            self.environment_id = interaction["environment_id"]

    def add(self, event: dict) -> None:
        kind = event.get("event_type")
        if kind == "interaction.created":
            self._snapshot(event.get("interaction") or {})
        elif kind == "interaction.completed":
            interaction = event.get("interaction") or {}
            self._snapshot(interaction)
            self.status = interaction.get("status") or "completed"
            self._add_usage(interaction.get("usage"))
        elif kind == "error":
            error = event.get("error") or {}
            self.error = f"{error.get('code') or 'error'}: {error.get('message') or 'the stream reported an error'}"
        elif kind == "step.start":
            self._start(int(event.get("index", 0)), event.get("step") or {})
        elif kind == "step.delta":
            self._delta(int(event.get("index", 0)), event.get("delta") or {})
        elif kind == "step.stop":
            self._stop(int(event.get("index", 0)))

    def _add_usage(self, usage: dict | None) -> None:
        if not usage:
            return
        self.usage_seen = True
        for name, value in usage.items():
            if isinstance(value, int):
                self.usage[name] = self.usage.get(name, 0) + value

    # --- steps ---

    def _start(self, index: int, step: dict) -> None:
        kind = step.get("type") or "unknown"
        entry = {"kind": kind, "step": step, "text": "", "arguments": "", "signature": step.get("signature")}
        self._steps[index] = entry
        if kind == "thought":
            self.stream.emit({"type": "thinking_start"})
            for part in step.get("summary") or []:
                entry["text"] += part.get("text", "") if isinstance(part, dict) else ""
        elif kind == "model_output":
            for part in step.get("content") or []:
                if isinstance(part, dict) and part.get("type") == "text" and part.get("text"):
                    entry["text"] += part["text"]
                    self.stream.emit({"type": "text_delta", "text": part["text"]})
        elif kind == "function_call":
            self.stream.emit({"type": "tool_call_start", "id": step.get("id"), "name": step.get("name")})

    def _delta(self, index: int, delta: dict) -> None:
        entry = self._steps.get(index)
        if entry is None:
            entry = {"kind": "model_output", "step": {"type": "model_output"}, "text": "", "arguments": ""}
            entry["signature"] = None
            self._steps[index] = entry
        kind = delta.get("type")
        if kind == "text":
            entry["text"] += delta.get("text", "")
            if entry["kind"] == "model_output":
                self.stream.emit({"type": "text_delta", "text": delta.get("text", "")})
        elif kind == "thought_summary":
            content = delta.get("content") or {}
            entry["text"] += content.get("text", "") if isinstance(content, dict) else ""
        elif kind == "thought_signature":
            entry["signature"] = delta.get("signature") or entry.get("signature")
        elif kind == "arguments_delta":
            entry["arguments"] += delta.get("arguments") or ""
            self.stream.emit(
                {"type": "tool_call_delta", "id": entry["step"].get("id"), "delta": delta.get("arguments")}
            )
        else:
            entry.setdefault("deltas", []).append(delta)  # other delta kinds are kept with their step, as observed

    def _stop(self, index: int) -> None:
        entry = self._steps.pop(index, None)
        if entry is not None:
            self._close(entry, stopped=False)

    def _close(self, entry: dict, *, stopped: bool) -> None:
        kind, step = entry["kind"], entry["step"]
        if kind == "thought":
            self.stream.emit({"type": "thinking_end"})
            if stopped and not entry.get("signature"):
                return  # a thought without its signature is not kept (the providers' rule for a stopped stream)
            block = {
                "type": "thinking",
                "text": entry["text"],
                "signature": entry.get("signature"),
                "provider": PROVIDER,
            }
            self._assistant()["blocks"].append(block)
        elif kind == "model_output":
            if entry["text"] or not stopped:
                self._assistant()["blocks"].append(text_block(entry["text"], stopped=stopped))
            others = [p for p in step.get("content") or [] if isinstance(p, dict) and p.get("type") != "text"]
            for part in others:
                self._assistant()["blocks"].append({"type": "vertex_content", "content": part})
        elif kind == "function_call":
            if stopped:
                return  # a half-received call is not kept
            raw = entry["arguments"] or json.dumps(step.get("arguments") or {})
            call_id = str(step.get("id") or f"call-{len(self.call_names) + 1}")
            name = str(step.get("name") or "")
            self.call_names[call_id] = name
            block = tool_call_block(id=call_id, name=name, arguments_raw=raw)
            self._assistant()["blocks"].append(block)
            self._calls.append(block)
        elif kind == "user_input" or kind == "function_result":
            return  # our own input, echoed
        elif kind.endswith("_call") and step.get("id"):
            if stopped:
                return
            # A tool the agent ran on Google's side (code execution, search, URL context, MCP...): a call whose
            # result step follows; neither is run here.
            call_id = str(step["id"])
            name = str(step.get("name") or kind.removesuffix("_call"))
            self.call_names[call_id] = name
            arguments = step.get("arguments")
            raw = json.dumps(arguments if arguments is not None else {}, ensure_ascii=False)
            block = tool_call_block(id=call_id, name=name, arguments_raw=raw)
            block["vertex_step"] = kind
            self._assistant()["blocks"].append(block)
        elif kind.endswith("_result") and step.get("call_id") in self.call_names:
            if stopped:
                return
            call_id = str(step["call_id"])
            message = tool_result_message(
                tool_call_id=call_id,
                name=self.call_names[call_id],
                content=_result_text(step.get("result")),
                is_error=bool(step.get("is_error")),
            )
            message["blocks"][0]["vertex_step"] = kind
            self.observed.append(message)
        else:
            # A step this version does not model: kept whole, under its own type.
            self._assistant()["blocks"].append({"type": f"vertex_{kind}", "step": step})

    # --- function calls answered here ---

    def pending_calls(self) -> list[dict]:
        return list(self._calls)

    def answer(self, call: dict, by_name: dict) -> dict:
        tool = by_name.get(call["name"])
        if tool is None:
            content, is_error = f"There is no tool named {call['name']!r}.", True
        elif call.get("arguments") is None:
            content, is_error = f"The arguments were not a JSON object: {call.get('parse_error')}", True
        else:
            try:
                # On a thread of its own, as the seam expects: the tool opens (and closes) its own connection.
                with ThreadPoolExecutor(max_workers=1, thread_name_prefix="vertex-tool") as pool:
                    content, is_error = pool.submit(tool.call, call["arguments"], call["id"]).result()
            except Exception as exc:  # a tool's own failure is the model's to see, not the firing's to die of
                logger.exception("vertex project tool failed", extra={"tool": call["name"]})
                content, is_error = f"The tool failed: {type(exc).__name__}", True
        self.observed.append(
            tool_result_message(tool_call_id=call["id"], name=call["name"], content=content, is_error=is_error)
        )
        result = {"type": "function_result", "call_id": call["id"], "name": call["name"], "result": content}
        if is_error:
            result["is_error"] = True
        return result

    # --- the result ---

    def finish(
        self,
        request: ChatRequest,
        *,
        continued_from: str | None,
        note: str | None,
        stopped: bool,
        timed_out: bool,
        params: VertexParams,
    ) -> ChatResult:
        if stopped:
            for index in sorted(self._steps):
                self._close(self._steps[index], stopped=True)
            self._steps = {}
            answered = {m["blocks"][0]["tool_call_id"] for m in self.observed if m["role"] == "tool"}
            for message in list(self.observed):
                for block in message["blocks"]:
                    if block.get("type") == "tool_call" and block["id"] not in answered:
                        self.observed.append(
                            tool_result_message(
                                tool_call_id=block["id"],
                                name=block["name"],
                                content="No result observed: the run was stopped before this tool answered.",
                                is_error=True,
                            )
                        )
                        answered.add(block["id"])
        observed = self.observed
        if (
            not observed
            or observed[-1]["role"] != "assistant"
            or any(b.get("type") == "tool_call" for b in observed[-1]["blocks"])
        ):
            observed.append({"role": "assistant", "blocks": [text_block("", stopped=True)] if stopped else []})
        raw = self.usage
        if self.usage_seen:
            usage = Usage(
                # Tool-use prompt tokens are input the agent's tools added; thought tokens are output.
                input_tokens=int(raw.get("total_input_tokens", 0)) + int(raw.get("total_tool_use_tokens", 0)),
                cached_tokens=int(raw.get("total_cached_tokens", 0)),
                output_tokens=int(raw.get("total_output_tokens", 0)) + int(raw.get("total_thought_tokens", 0)),
                reasoning_tokens=int(raw.get("total_thought_tokens", 0)),
            )
        else:
            from ..adapters.common import estimated_usage

            usage = estimated_usage(request, [b for m in observed for b in m["blocks"]])
        final = observed[-1]
        runtime = {
            "runtime": PROVIDER,
            "agent": params.agent,
            "interaction_id": self.interaction_id,
            "environment_id": self.environment_id,
            "continued_from": continued_from,
        }
        if len(self.interaction_ids) > 1:
            runtime["interaction_ids"] = list(self.interaction_ids)
        if note:
            runtime["note"] = note
        if timed_out:
            runtime["end_reason"] = "max_wall_time"
        final["meta"] = {**final.get("meta", {}), "runtime": runtime}
        final["usage"] = usage.to_dict()
        stop_reason = "stopped" if stopped else _DONE.get(self.status or "", "other")
        if self.status == "requires_action" and not stopped:
            stop_reason = "other"  # a function round limit or the deadline ended it
        return ChatResult(
            message=final,
            usage=usage,
            stop_reason=stop_reason,
            provider_ids={
                "interaction_id": self.interaction_id,
                "environment_id": self.environment_id,
                "interaction_ids": list(self.interaction_ids),
                "status": self.status,
            },
            observed=observed,
        )
