"""Fake Vertex AI Interactions API (managed agents), written from Google's documented wire protocol.

Endpoints: `POST /v1beta1/projects/{project}/locations/{location}/interactions` (JSON body; `stream: true` answers
Server-Sent Events `interaction.created`, `step.start`, `step.delta`, `step.stop`, `interaction.completed`, each
`data:` a JSON object with `event_type`), `GET .../interactions/{id}` (the Interaction resource, `environment_id`
included), and an OAuth token endpoint `POST /token` for service-account sign-in (JWT bearer grant).

It keeps what Google keeps server-side: every interaction (its status, environment and the interaction it continues)
and every environment. It refuses what Google refuses: a missing bearer token or one it did not issue (when it
issues tokens), an unknown `previous_interaction_id` (404), continuing an interaction that is still running or that
failed, an unknown environment id, a `function_result` input that does not answer the calls the previous interaction
is waiting on, and a request without `agent` or `input`.

Script with `Turn([...])` from base.py (Think -> a `thought` step with summary and signature, Text -> a `model_output`
step streamed as `text` deltas, Call -> a `function_call` step: the interaction then ends `requires_action`), plus
`Exec(code, output)` for a code execution the agent ran in its sandbox (a `code_execution_call` step and its
`code_execution_result`).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from urllib.parse import parse_qs

from .base import (
    Call,
    ErrorReply,
    FakeProviderServer,
    RawReply,
    RecordedRequest,
    Rejected,
    Text,
    Think,
    Turn,
    json_reply,
    sse_frame,
    stream_of,
)
from .media import BadMedia, b64decode, sniff

STATUS_NAMES = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND"}
CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"
GOOGLE_TOKEN_AUDIENCE = "https://oauth2.googleapis.com/token"


# The Interactions API's image and document content types (google-genai's ImageContent / DocumentContent).
IMAGE_TYPES = (
    "image/png",
    "image/jpeg",
    "image/webp",
    "image/heic",
    "image/heif",
    "image/gif",
    "image/bmp",
    "image/tiff",
)
DOCUMENT_TYPES = (
    "application/pdf",
    "text/csv",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
)


@dataclass
class Exec:
    code: str
    output: str
    is_error: bool = False


class FakeVertexInteractions(FakeProviderServer):
    provider = "vertex"

    def __init__(self, project: str = "P", location: str = "L", *, environment_in_stream: bool = False) -> None:
        super().__init__()
        self.project = project
        self.location = location
        # The SSE lifecycle snapshots do not declare environment_id; off by default, so clients must read it.
        self.environment_in_stream = environment_in_stream
        self.interactions: dict[str, dict] = {}
        self.environments: set[str] = set()
        self.issued_tokens: set[str] = set()
        self.token_requests: list[dict] = []
        self.accepted_tokens: set[str] | None = None  # when set, only these bearer tokens are accepted

    @property
    def collection(self) -> str:
        return f"/v1beta1/projects/{self.project}/locations/{self.location}/interactions"

    @property
    def token_uri(self) -> str:
        return f"{self.root_url}/token"

    def creates(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.method == "POST" and r.path == self.collection]

    # --- errors ---

    def render_error(self, error: ErrorReply) -> RawReply:
        body = {
            "error": {
                "code": error.status,
                "message": error.message,
                "status": error.kind or STATUS_NAMES.get(error.status, "INTERNAL"),
            }
        }
        return json_reply(error.status, body, error.headers)

    def _reject(self, status: int, message: str) -> None:
        raise Rejected(ErrorReply(status, message))

    # --- sign-in and reads ---

    def handle_other(self, request: RecordedRequest) -> RawReply | None:
        if request.method == "POST" and request.path == "/token":
            return self._token(request)
        if request.method == "GET" and request.path.startswith(self.collection + "/"):
            self._check_auth(request)
            interaction = self.interactions.get(request.path.rsplit("/", 1)[-1])
            if interaction is None:
                return self.render_error(ErrorReply(404, "Interaction not found."))
            return json_reply(200, self._resource(interaction))
        if request.path != self.collection:
            return self.render_error(ErrorReply(404, f"Unknown path {request.path}."))
        return None

    def _token(self, request: RecordedRequest) -> RawReply:
        form = parse_qs(request.body if isinstance(request.body, str) else "")
        grant = (form.get("grant_type") or [""])[0]
        assertion = (form.get("assertion") or [""])[0]
        if grant != "urn:ietf:params:oauth:grant-type:jwt-bearer" or assertion.count(".") != 2:
            return json_reply(400, {"error": "invalid_grant", "error_description": "Invalid JWT bearer grant."})
        payload_part = assertion.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload_part + "=" * (-len(payload_part) % 4)))
        self.token_requests.append(claims)
        # Google's JWT bearer grant: the assertion's audience is Google's token endpoint, whatever URL it is posted to.
        if claims.get("aud") != GOOGLE_TOKEN_AUDIENCE or CLOUD_PLATFORM not in str(claims.get("scope", "")).split():
            return json_reply(400, {"error": "invalid_scope", "error_description": "Invalid audience or scope."})
        token = f"ya29.fake-{self.next_id('tok')}"
        self.issued_tokens.add(token)
        return json_reply(200, {"access_token": token, "expires_in": 3599, "token_type": "Bearer"})

    def _check_auth(self, request: RecordedRequest) -> None:
        auth = request.headers.get("authorization", "")
        if not auth.startswith("Bearer ") or not auth[7:]:
            self._reject(401, "Request is missing required authentication credential.")
        if self.accepted_tokens is not None and auth[7:] not in self.accepted_tokens | self.issued_tokens:
            self._reject(401, "Request had invalid authentication credentials.")

    # --- validation ---

    def validate(self, request: RecordedRequest) -> None:
        self._check_auth(request)
        body = request.body if isinstance(request.body, dict) else {}
        if not isinstance(body.get("agent"), str) or not body["agent"]:
            self._reject(400, "agent is required for an agent interaction.")
        if "input" not in body:
            self._reject(400, "input is required.")
        self._check_input(body.get("input"))
        environment = body.get("environment")
        if isinstance(environment, str) and environment != "remote" and environment not in self.environments:
            self._reject(404, f"Environment {environment} not found.")
        for tool in body.get("tools") or []:
            if tool.get("type") == "function" and not tool.get("name"):
                self._reject(400, "A function tool needs a name.")
        previous_id = body.get("previous_interaction_id")
        if previous_id is None:
            if self._function_results(body.get("input")):
                self._reject(400, "function_result input needs previous_interaction_id.")
            return
        previous = self.interactions.get(previous_id)
        if previous is None:
            self._reject(404, f"Interaction {previous_id} not found.")
        if previous["status"] not in ("completed", "requires_action", "incomplete"):
            self._reject(400, f"Interaction {previous_id} cannot be continued: its status is {previous['status']}.")
        results = self._function_results(body.get("input"))
        if previous["status"] == "requires_action":
            answered = {r.get("call_id") for r in results}
            if answered != set(previous["pending_calls"]):
                self._reject(400, "The input must provide a function_result for every pending function_call.")
        elif results:
            self._reject(400, "function_result does not answer a pending function_call.")

    def _check_input(self, value) -> None:
        """Content input as the Interactions API types it: `text`; `image` and `document` with base64 `data` (or a
        `uri`) and a `mime_type` of the types it lists (documents: PDF, CSV and office formats, not plain text)."""
        if not isinstance(value, list):
            return
        for index, content in enumerate(value):
            kind = content.get("type") if isinstance(content, dict) else None
            if kind == "user_input":  # a step holding the contents (the SDK wraps a content list in one)
                self._check_input(content.get("content"))
                continue
            if kind in ("text", "function_result"):
                continue
            if kind not in ("image", "document"):
                self._reject(400, f"input[{index}].type: unknown content type {kind!r}.")
            allowed = IMAGE_TYPES if kind == "image" else DOCUMENT_TYPES
            if content.get("mime_type") not in allowed:
                self._reject(
                    400, f"input[{index}].mime_type: {content.get('mime_type')} is not a supported {kind} type."
                )
            if content.get("uri"):
                continue
            try:
                data = b64decode(content.get("data"))
            except BadMedia:
                self._reject(400, f"input[{index}].data: invalid base64.")
            if kind == "image" and sniff(data) not in (content["mime_type"], None):
                self._reject(400, f"input[{index}]: the image is not {content['mime_type']}.")

    @staticmethod
    def _function_results(value) -> list[dict]:
        if not isinstance(value, list):
            return []
        return [s for s in value if isinstance(s, dict) and s.get("type") == "function_result"]

    # --- replies ---

    def _resource(self, interaction: dict) -> dict:
        keys = ("id", "status", "agent", "environment_id", "previous_interaction_id", "usage", "created", "updated")
        resource = {k: interaction[k] for k in keys if interaction.get(k) is not None}
        resource["object"] = "interaction"
        return resource

    def render(self, request: RecordedRequest, turn: Turn):
        body = request.body
        previous = self.interactions.get(body.get("previous_interaction_id") or "")
        environment = body.get("environment")
        if isinstance(environment, str) and environment != "remote":
            environment_id = environment
        elif previous is not None and environment is None:
            environment_id = previous["environment_id"]
        else:
            environment_id = self.next_id("env")
            self.environments.add(environment_id)
        interaction_id = self.next_id("int")
        steps, pending = self._steps(turn)
        status = "requires_action" if pending else ("incomplete" if turn.stop == "max_tokens" else "completed")
        usage = {
            "total_input_tokens": turn.input_tokens,
            "total_cached_tokens": turn.cached_tokens,
            "total_output_tokens": turn.output_tokens,
            "total_thought_tokens": turn.reasoning_tokens,
            "total_tokens": turn.input_tokens + turn.output_tokens + turn.reasoning_tokens,
        }
        record = {
            "id": interaction_id,
            "status": "in_progress",
            "agent": body["agent"],
            "environment_id": environment_id,
            "previous_interaction_id": body.get("previous_interaction_id"),
            "created": "2026-12-03T08:00:00Z",
            "pending_calls": [],
        }
        self.interactions[interaction_id] = record
        if not body.get("stream"):
            record.update(status=status, usage=usage, pending_calls=pending, steps=steps)
            public = [{k: v for k, v in step.items() if k != "raw"} for step in steps]
            return json_reply(200, {**self._resource(record), "steps": public})
        frames: list[bytes] = []
        labels: list[str] = []

        def emit(event: dict, label: str = "") -> None:
            frames.append(sse_frame(event, event["event_type"]))
            labels.append(label)

        snapshot = {"id": interaction_id, "status": "in_progress", "agent": body["agent"], "object": "interaction"}
        if self.environment_in_stream:
            snapshot["environment_id"] = environment_id
        emit({"event_type": "interaction.created", "interaction": snapshot})
        for index, step in enumerate(steps):
            kind = step["type"]
            if kind == "thought":
                emit({"event_type": "step.start", "index": index, "step": {"type": "thought"}})
                summary = step["summary"][0]["text"]
                delta = {"type": "thought_summary", "content": {"type": "text", "text": summary}}
                emit({"event_type": "step.delta", "index": index, "delta": delta}, "thinking_delta")
                signature = {"type": "thought_signature", "signature": step["signature"]}
                emit({"event_type": "step.delta", "index": index, "delta": signature})
            elif kind == "model_output":
                emit({"event_type": "step.start", "index": index, "step": {"type": "model_output", "content": []}})
                text = step["content"][0]["text"]
                cut = max(1, len(text) // 2)
                for piece in (text[:cut], text[cut:]):
                    if piece:
                        delta = {"type": "text", "text": piece}
                        emit({"event_type": "step.delta", "index": index, "delta": delta}, "text_delta")
            elif kind == "function_call":
                start = {"type": "function_call", "id": step["id"], "name": step["name"], "arguments": {}}
                emit({"event_type": "step.start", "index": index, "step": start})
                raw = step["raw"]
                for piece in (raw[: len(raw) // 2], raw[len(raw) // 2 :]):
                    delta = {"type": "arguments_delta", "arguments": piece}
                    emit({"event_type": "step.delta", "index": index, "delta": delta}, "tool_call_delta")
            else:  # server-side tool steps arrive whole
                emit({"event_type": "step.start", "index": index, "step": step})
            emit({"event_type": "step.stop", "index": index})
        record.update(status=status, usage=usage, pending_calls=pending)
        done = {"id": interaction_id, "status": status, "object": "interaction", "usage": usage}
        emit({"event_type": "interaction.completed", "interaction": done}, "terminal")
        sse = stream_of(frames, labels, turn)
        if sse.cut_at is not None:
            record["status"] = "failed"  # the connection died mid-interaction: nothing to continue from
        return sse

    def _steps(self, turn: Turn) -> tuple[list[dict], list[str]]:
        steps: list[dict] = []
        pending: list[str] = []
        for part in turn.parts:
            if isinstance(part, Think):
                signature = part.signature or base64.b64encode(f"sig:{part.text}".encode()).decode()
                steps.append(
                    {"type": "thought", "signature": signature, "summary": [{"type": "text", "text": part.text}]}
                )
            elif isinstance(part, Text):
                steps.append({"type": "model_output", "content": [{"type": "text", "text": part.text}]})
            elif isinstance(part, Call):
                call_id = part.id or self.next_id("call")
                try:
                    arguments = json.loads(part.arguments)
                except ValueError:
                    arguments = {}
                steps.append(
                    {
                        "type": "function_call",
                        "id": call_id,
                        "name": part.name,
                        "arguments": arguments,
                        "raw": part.arguments,
                    }
                )
                pending.append(call_id)
            elif isinstance(part, Exec):
                call_id = self.next_id("exec")
                steps.append(
                    {
                        "type": "code_execution_call",
                        "id": call_id,
                        "arguments": {"code": part.code, "language": "python"},
                    }
                )
                steps.append(
                    {
                        "type": "code_execution_result",
                        "call_id": call_id,
                        "result": part.output,
                        "is_error": part.is_error,
                    }
                )
            else:
                raise AssertionError(f"the Vertex fake cannot script {part!r}")
        return steps, pending
