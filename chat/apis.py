"""REST for API clients, mirroring the chat page. Thin: parse, check ownership, call a service or selector."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import RegexValidator
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from chat import selectors, services
from memory.history import memory_run_writes, memory_run_writes_undo, memory_runs_created_forget
from opencompany.idempotency import idempotent
from workflows.selectors import access_workflow

ERROR_RESPONSE = inline_serializer(
    "ChatError",
    fields={
        "code": serializers.ChoiceField(
            choices=[
                "run_in_progress",
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
            ]
        ),
        "message": serializers.CharField(help_text="Plain words for the owner."),
        "run_id": serializers.IntegerField(required=False, help_text="With run_in_progress: the run in the lane."),
        "revision": serializers.IntegerField(required=False, help_text="With revision_conflict: the current one."),
        "field": serializers.CharField(required=False, help_text="With invalid_text: where the unstorable text is."),
        "errors": serializers.JSONField(required=False, help_text="With invalid_request: the field errors."),
    },
)
REFUSALS = {400: ERROR_RESPONSE, 404: ERROR_RESPONSE, 409: ERROR_RESPONSE}


class StepOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
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


def _thread(workflow) -> dict:
    workflow.refresh_from_db()
    return ThreadOutputSerializer(selectors.chat_thread(workflow=workflow)).data


class ChatThreadApi(APIView):
    @extend_schema(
        operation_id="chat_thread",
        summary="The chat: active path, versions and runs",
        responses={200: ThreadOutputSerializer, 404: ERROR_RESPONSE},
    )
    def get(self, request, workflow_id: int):
        workflow = access_workflow(user=request.user, workflow_id=workflow_id)
        return Response(_thread(workflow))


def message_text_field() -> serializers.CharField:
    """What the owner writes: some non-space text, at most CHAT_MESSAGE_MAX_CHARS; the schema publishes exactly the
    rule the service (`check_text`) keeps, so `text: ""` is refused by both."""
    return serializers.CharField(
        trim_whitespace=False,
        max_length=settings.CHAT_MESSAGE_MAX_CHARS,
        validators=[RegexValidator(r"\S", message="Write a message first.")],
    )


class ChatMessageSendApi(APIView):
    throttle_scope = "chat_send"  # opencompany/throttles.py

    class InputSerializer(serializers.Serializer):
        text = message_text_field()
        client_message_id = serializers.CharField(required=False, allow_blank=True, max_length=100)
        expected_revision = serializers.IntegerField(required=False, allow_null=True)

    class OutputSerializer(serializers.Serializer):
        message_id = serializers.IntegerField()
        run = RunOutputSerializer()
        created = serializers.BooleanField(help_text="False when client_message_id was seen before (nothing started).")
        revision = serializers.IntegerField()

    @extend_schema(
        operation_id="chat_message_send",
        summary="Send a message and start its answer",
        request=InputSerializer,
        responses={201: OutputSerializer, 200: OutputSerializer, **REFUSALS},
    )
    @idempotent
    def post(self, request, workflow_id: int):
        workflow = access_workflow(user=request.user, workflow_id=workflow_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        message, run, created = services.chat_message_send(workflow=workflow, **data.validated_data)
        return Response(
            self.OutputSerializer(
                {
                    "message_id": message.pk,
                    "run": selectors.run_data(run),
                    "created": created,
                    "revision": message.session.revision,
                }
            ).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )


class ChatMessageEditApi(APIView):
    throttle_scope = "chat_send"  # opencompany/throttles.py

    class InputSerializer(serializers.Serializer):
        text = message_text_field()
        expected_revision = serializers.IntegerField(required=False, allow_null=True)
        client_message_id = serializers.CharField(required=False, allow_blank=True, max_length=100)

    class OutputSerializer(serializers.Serializer):
        message_id = serializers.IntegerField()
        run = RunOutputSerializer()

    @extend_schema(
        operation_id="chat_message_edit",
        summary="Edit one of your messages: the new version is answered, the agents forget the old branch",
        request=InputSerializer,
        responses={201: OutputSerializer, **REFUSALS},
    )
    @idempotent
    def post(self, request, workflow_id: int, message_id: int):
        workflow = access_workflow(user=request.user, workflow_id=workflow_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        message, run = services.chat_message_edit(workflow=workflow, message_id=message_id, **data.validated_data)
        return Response(
            self.OutputSerializer({"message_id": message.pk, "run": selectors.run_data(run)}).data,
            status=status.HTTP_201_CREATED,
        )


class MoveInputSerializer(serializers.Serializer):
    expected_revision = serializers.IntegerField(required=False, allow_null=True)


class ChatMessageRegenerateApi(APIView):
    throttle_scope = "chat_send"  # opencompany/throttles.py

    @extend_schema(
        operation_id="chat_message_regenerate",
        summary="Try again: answer the latest message again, beside the latest answer",
        request=MoveInputSerializer,
        responses={201: RunOutputSerializer, **REFUSALS},
    )
    @idempotent
    def post(self, request, workflow_id: int, message_id: int):
        workflow = access_workflow(user=request.user, workflow_id=workflow_id)
        data = MoveInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        run = services.chat_message_regenerate(workflow=workflow, message_id=message_id, **data.validated_data)
        return Response(RunOutputSerializer(selectors.run_data(run)).data, status=status.HTTP_201_CREATED)


class ChatMessageSwitchApi(APIView):
    @extend_schema(
        operation_id="chat_message_switch",
        summary="Show another version of a message (‹ ›); the agents' conversations follow",
        request=MoveInputSerializer,
        responses={200: ThreadOutputSerializer, **REFUSALS},
    )
    @idempotent
    def post(self, request, workflow_id: int, message_id: int):
        workflow = access_workflow(user=request.user, workflow_id=workflow_id)
        data = MoveInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        services.chat_message_switch(workflow=workflow, message_id=message_id, **data.validated_data)
        return Response(_thread(workflow))


class ChatMessageFeedbackApi(APIView):
    class InputSerializer(serializers.Serializer):
        rating = serializers.ChoiceField(choices=["good", "bad"], allow_null=True, allow_blank=True)

    class OutputSerializer(serializers.Serializer):
        message_id = serializers.IntegerField()
        rating = serializers.ChoiceField(choices=["good", "bad"], allow_null=True)

    @extend_schema(
        operation_id="chat_message_feedback",
        summary="Rate an answer good or bad (null takes it back); the agent hears of it with the next message",
        request=InputSerializer,
        responses={200: OutputSerializer, **REFUSALS},
    )
    def post(self, request, workflow_id: int, message_id: int):
        workflow = access_workflow(user=request.user, workflow_id=workflow_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        feedback = services.chat_feedback_set(
            workflow=workflow, message_id=message_id, rating=data.validated_data.get("rating") or None
        )
        return Response({"message_id": int(message_id), "rating": feedback.rating if feedback else None})


class ChatRunApi(APIView):
    @extend_schema(
        operation_id="chat_run_get",
        summary="One run (answer being worked on)",
        responses={200: RunOutputSerializer, 404: ERROR_RESPONSE},
    )
    def get(self, request, workflow_id: int, run_id: int):
        workflow = access_workflow(user=request.user, workflow_id=workflow_id)
        return Response(RunOutputSerializer(selectors.chat_run_get(workflow=workflow, run_id=run_id)).data)


class ChatRunStopApi(APIView):
    @extend_schema(
        operation_id="chat_run_stop",
        summary="Stop an answer: pending stops at once, running keeps what arrived (status stopped)",
        request=None,
        responses={200: RunOutputSerializer, 404: ERROR_RESPONSE},
    )
    def post(self, request, workflow_id: int, run_id: int):
        workflow = access_workflow(user=request.user, workflow_id=workflow_id)
        run = services.chat_run_stop(workflow=workflow, run_id=run_id)
        return Response(RunOutputSerializer(selectors.chat_run_get(workflow=workflow, run_id=run.pk)).data)


class ChatClearApi(APIView):
    class OutputSerializer(serializers.Serializer):
        messages = serializers.IntegerField()
        runs = serializers.IntegerField()
        snapshots = serializers.IntegerField()
        notes = serializers.IntegerField()
        feedback = serializers.IntegerField()
        conversations = serializers.IntegerField()

    @extend_schema(
        operation_id="chat_clear",
        summary="Clear chat: messages, runs, snapshots, notes, feedback; the agents forget the conversation",
        request=None,
        responses={200: OutputSerializer, **REFUSALS},
    )
    def post(self, request, workflow_id: int):
        workflow = access_workflow(user=request.user, workflow_id=workflow_id)
        return Response(self.OutputSerializer(services.chat_clear(workflow=workflow)).data)


_MEMORY_WRITES = inline_serializer(
    "ChatMemoryWrites",
    fields={"writes": serializers.ListField(child=serializers.DictField()), "count": serializers.IntegerField()},
)


class ChatRunMemoryApi(APIView):
    @extend_schema(
        operation_id="chat_run_memory_writes",
        summary="What this answer's agents saved to memory (each version with its provenance)",
        responses={200: _MEMORY_WRITES, 404: ERROR_RESPONSE},
    )
    def get(self, request, workflow_id: int, run_id: int):
        workflow = access_workflow(user=request.user, workflow_id=workflow_id)
        run_ids = [selectors.chat_run_id_of(workflow=workflow, run_id=run_id)]
        writes = memory_run_writes(owner=request.user, workflow=workflow, chat_run_ids=run_ids)
        return Response({"writes": writes, "count": len(writes)})


class ChatRunMemoryUndoApi(APIView):
    @extend_schema(
        operation_id="chat_run_memory_undo",
        summary="Undo what this answer saved to memory: new items forgotten, changed items restored (new versions)",
        request=None,
        responses={
            200: inline_serializer(
                "ChatMemoryUndo",
                fields={
                    "restored": serializers.ListField(child=serializers.IntegerField()),
                    "forgotten": serializers.ListField(child=serializers.IntegerField()),
                    "already_gone": serializers.ListField(child=serializers.IntegerField()),
                },
            ),
            404: ERROR_RESPONSE,
        },
    )
    def post(self, request, workflow_id: int, run_id: int):
        workflow = access_workflow(user=request.user, workflow_id=workflow_id)
        run_pk = selectors.chat_run_id_of(workflow=workflow, run_id=run_id)
        return Response(memory_run_writes_undo(owner=request.user, workflow=workflow, chat_run_id=run_pk))


class ChatBranchMemoryApi(APIView):
    @extend_schema(
        operation_id="chat_branch_memory_writes",
        summary="What the answers on a branch (this message and everything under it) saved to memory",
        responses={200: _MEMORY_WRITES, 404: ERROR_RESPONSE},
    )
    def get(self, request, workflow_id: int, message_id: int):
        workflow = access_workflow(user=request.user, workflow_id=workflow_id)
        run_ids = selectors.chat_branch_run_ids(workflow=workflow, message_id=message_id)
        writes = memory_run_writes(owner=request.user, workflow=workflow, chat_run_ids=run_ids)
        return Response({"writes": writes, "count": len(writes)})

    @extend_schema(
        operation_id="chat_branch_memory_forget",
        summary="Forget the memories the answers on a branch created (and nothing else)",
        request=None,
        responses={
            200: inline_serializer(
                "ChatBranchMemoryForget", fields={"forgotten": serializers.ListField(child=serializers.IntegerField())}
            ),
            404: ERROR_RESPONSE,
        },
    )
    def post(self, request, workflow_id: int, message_id: int):
        workflow = access_workflow(user=request.user, workflow_id=workflow_id)
        run_ids = selectors.chat_branch_run_ids(workflow=workflow, message_id=message_id)
        return Response(memory_runs_created_forget(owner=request.user, workflow=workflow, chat_run_ids=run_ids))


class ChatRunRequestApi(APIView):
    @extend_schema(
        operation_id="chat_run_request",
        summary="What this answer was sent: per request the message counts, tools, recalled memories, tokens, cost",
        responses={
            200: inline_serializer(
                "ChatRunRequest",
                fields={
                    "run_id": serializers.IntegerField(),
                    "firing_id": serializers.CharField(required=False),
                    "provider": serializers.CharField(required=False),
                    "model": serializers.CharField(required=False),
                    "system_prompt": serializers.CharField(required=False),
                    "tools": serializers.ListField(child=serializers.DictField(), required=False),
                    "steps": serializers.ListField(child=serializers.DictField()),
                    "recalled_memories": serializers.ListField(child=serializers.DictField(), required=False),
                    "tokens": serializers.DictField(required=False),
                    "cost": serializers.CharField(allow_null=True, required=False),
                    "notes_carried": serializers.IntegerField(),
                    "changed_since_previous": serializers.DictField(allow_null=True),
                    "next_turn": serializers.DictField(allow_null=True),
                },
            ),
            404: ERROR_RESPONSE,
        },
    )
    def get(self, request, workflow_id: int, run_id: int):
        workflow = access_workflow(user=request.user, workflow_id=workflow_id)
        return Response(selectors.chat_run_request_view(workflow=workflow, run_id=run_id))
