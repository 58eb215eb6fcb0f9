"""The shapes the chat API shares between its views: the error, a run and its steps, a message, the thread."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import RegexValidator
from drf_spectacular.utils import inline_serializer
from rest_framework import serializers

from agents.apis import ToolApprovalOutput

from .. import selectors

ERROR_RESPONSE = inline_serializer(
    "ChatError",
    fields={
        "code": serializers.ChoiceField(
            choices=[
                "run_in_progress",
                "approval_pending",
                "revision_conflict",
                "cannot_rewind",
                "branch_unavailable",
                "older_generation",
                "not_editable",
                "not_found",
                "invalid_request",
                "invalid_json",
                "invalid_text",
                "no_answering_agent",
                "workflow_stopped",
                "invalid_idempotency_key",
                "idempotency_key_reused",
                "file_not_found",
                "too_many_files",
                "message_files_too_large",
            ]
        ),
        "message": serializers.CharField(help_text="Plain words for the owner."),
        "run_id": serializers.IntegerField(
            required=False, help_text="With run_in_progress or approval_pending: the run in the lane."
        ),
        "revision": serializers.IntegerField(required=False, help_text="With revision_conflict: the current one."),
        "field": serializers.CharField(required=False, help_text="With invalid_text: where the unstorable text is."),
        "errors": serializers.JSONField(required=False, help_text="With invalid_request: the field errors."),
    },
)


REFUSALS = {400: ERROR_RESPONSE, 404: ERROR_RESPONSE, 409: ERROR_RESPONSE, 413: ERROR_RESPONSE}


class StepOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    label = serializers.CharField(
        help_text="The step's line: what the tool's node type says of the call (an MCP tool names its server), "
        "else the name."
    )
    state = serializers.ChoiceField(choices=["started", "finished"])
    is_error = serializers.BooleanField()
    agent_node_id = serializers.CharField()
    arguments = serializers.JSONField(help_text="The arguments the agent called the tool with.")
    summary = serializers.CharField(help_text="A short line about the result, in plain words.")
    result = serializers.CharField(allow_blank=True, help_text="The tool's result as it answered (capped).")


class MarkerOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.ChoiceField(choices=["context_cleared", "compacted"])
    after_message_id = serializers.IntegerField(allow_null=True, help_text="Shown after this message (null: first).")
    created_at = serializers.DateTimeField()


class RunOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.ChoiceField(choices=["message", "edit", "regenerate"])
    state = serializers.ChoiceField(
        choices=["queued", "pending", "running", "stopping", "finished", "error", "stopped"]
    )
    user_message_id = serializers.IntegerField()
    reply_message_id = serializers.IntegerField(allow_null=True)
    generation = serializers.IntegerField()
    agent_node_id = serializers.CharField()
    outcome = serializers.CharField(allow_blank=True)
    error_code = serializers.CharField(allow_blank=True)
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    duration_ms = serializers.IntegerField(allow_null=True)
    steps = StepOutputSerializer(many=True)
    seq = serializers.IntegerField(help_text="The last event seq of this run; apply only later events.")
    partial_text = serializers.CharField(allow_blank=True, help_text="Text streamed so far (active runs only).")
    partial_html = serializers.CharField(
        allow_blank=True, help_text="partial_text rendered like a finished answer (active runs only)."
    )
    approvals = ToolApprovalOutput(
        many=True,
        help_text="Tool calls that asked the owner first (teammates' too): `pending` ones wait for a decision at "
        "/api/tool-approvals/<id>/decision/; decided ones say who decided what, when.",
    )


class MessageFileOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField(allow_null=True)
    name = serializers.CharField()
    media_type = serializers.CharField()
    size = serializers.IntegerField()
    url = serializers.CharField(allow_blank=True, help_text="The owner's download (GET /api/files/{id}/).")
    is_image = serializers.BooleanField()


def file_ids_field() -> serializers.ListField:
    return serializers.ListField(
        child=serializers.IntegerField(min_value=1),
        required=False,
        max_length=settings.FILE_MESSAGE_MAX_FILES,
        help_text="Files uploaded with POST /api/files/ that the message carries (docs/chat.md#files).",
    )


class SiblingsOutputSerializer(serializers.Serializer):
    index = serializers.IntegerField()
    count = serializers.IntegerField()
    previous_id = serializers.IntegerField(allow_null=True)
    next_id = serializers.IntegerField(allow_null=True)


class MessageOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    parent_id = serializers.IntegerField(allow_null=True)
    role = serializers.ChoiceField(choices=["user", "assistant"])
    kind = serializers.ChoiceField(choices=["message", "edit", "answer", "retry"])
    text = serializers.CharField(allow_blank=True)
    html = serializers.CharField(
        allow_blank=True,
        help_text="Answers: Markdown rendered and sanitized server-side. The owner's messages: the text as typed, "
        "escaped, line breaks kept.",
    )
    status = serializers.ChoiceField(choices=["complete", "stopped", "error"])
    generation = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    edit_of = serializers.IntegerField(allow_null=True)
    error_code = serializers.CharField(allow_blank=True)
    error_message = serializers.CharField(allow_blank=True, help_text="Why the answer failed, in words.")
    trigger = serializers.DictField(
        child=serializers.CharField(),
        allow_null=True,
        help_text="A turn a schedule or webhook sent: {kind: schedule|webhook, name}; null for the owner's own.",
    )
    files = MessageFileOutputSerializer(many=True, help_text="The files the owner attached to this message.")
    siblings = SiblingsOutputSerializer()
    rating = serializers.ChoiceField(choices=["good", "bad"], allow_null=True)
    run = RunOutputSerializer(allow_null=True)
    can_edit = serializers.BooleanField()
    can_regenerate = serializers.BooleanField()


class ThreadOutputSerializer(serializers.Serializer):
    workflow_id = serializers.IntegerField()
    live_generation = serializers.IntegerField()
    revision = serializers.IntegerField(help_text="Send it back as expected_revision with a move.")
    hub_epoch = serializers.CharField()
    messages = MessageOutputSerializer(many=True, help_text="The active path, oldest first.")
    markers = MarkerOutputSerializer(
        many=True, help_text="Where the agent's context was cleared or compacted, on this path."
    )
    active_run = RunOutputSerializer(allow_null=True)
    memory = serializers.DictField(
        help_text="Memory the answers saved: `runs` by run id (items with `kept`, what an Undo took back, "
        "`can_undo`), `left` by message id (what the versions beside it, left by Edit or Try again, saved and "
        "still keep). See docs/chat.md."
    )


def thread_data(workflow) -> dict:
    """The thread as `ThreadOutputSerializer` sends it, read after the workflow row is fresh."""
    workflow.refresh_from_db()
    return ThreadOutputSerializer(selectors.chat_thread(workflow=workflow)).data


def message_text_field() -> serializers.CharField:
    """What the owner writes: some non-space text, at most CHAT_MESSAGE_MAX_CHARS; the schema publishes exactly the
    rule the service (`check_text`) keeps, so `text: ""` is refused by both."""
    return serializers.CharField(
        trim_whitespace=False,
        max_length=settings.CHAT_MESSAGE_MAX_CHARS,
        validators=[RegexValidator(r"\S", message="Write a message first.")],
    )


class MoveInputSerializer(serializers.Serializer):
    expected_revision = serializers.IntegerField(required=False, allow_null=True)
