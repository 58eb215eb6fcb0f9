"""The run history and the manual run of a workflow's answering agent (the editor's Test run).

Firings are the runtime's, so these endpoints live here, above workflows; their URLs stay under the workflow.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from core.errors import NotFoundError, ServiceError
from workflows.apis import ErrorOutput, InvalidGraphOutput
from workflows.selectors import access_workflow

from .selectors import workflow_run_detail, workflow_runs
from .services.editor_runs import firing_test_run

_NOT_FOUND = {404: ErrorOutput}
_BAD = {400: InvalidGraphOutput}


# --- running from the editor, run history ---------------------------------------------------------------------


class RunStepOutput(serializers.Serializer):
    iteration = serializers.IntegerField()
    state = serializers.CharField()
    error_code = serializers.CharField(allow_blank=True)
    duration_ms = serializers.IntegerField(allow_null=True)
    stop_reason = serializers.CharField(allow_null=True, required=False)
    tool_calls = serializers.ListField(child=serializers.CharField(allow_null=True))
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    cost = serializers.DecimalField(max_digits=14, decimal_places=6, allow_null=True)
    billed = serializers.CharField(allow_null=True, help_text="The ledger outcome: ok, error or ambiguous.")


class RunToolCallOutput(serializers.Serializer):
    iteration = serializers.IntegerField()
    tool_call_id = serializers.CharField()
    name = serializers.CharField()
    is_error = serializers.BooleanField()
    result_chars = serializers.IntegerField()
    error_preview = serializers.CharField(allow_blank=True)
    arguments_preview = serializers.CharField(
        allow_blank=True, help_text="The call's arguments as JSON (cut at 4,000 characters)."
    )
    result_preview = serializers.CharField(allow_blank=True, help_text="What the tool answered (cut likewise).")
    delegated_to = serializers.CharField(allow_null=True)
    state = serializers.CharField(help_text="completed, or for a remote call started / ambiguous (never re-sent)")
    duration_ms = serializers.IntegerField(allow_null=True)
    server = serializers.CharField(allow_blank=True, help_text="An MCP tool's server: its URL or stdio name")
    tool = serializers.CharField(allow_blank=True, help_text="An MCP tool's own name on its server")
    arguments = serializers.CharField(allow_blank=True, help_text="An MCP call's arguments (JSON, secrets redacted)")


class RunTriggerOutput(serializers.Serializer):
    node_id = serializers.CharField(help_text="The schedule or webhook trigger node whose message the run answered.")
    label = serializers.CharField(help_text="Its turns' name when it fired: “Scheduled: morning summary”.")


class RunSummaryOutput(serializers.Serializer):
    id = serializers.CharField()
    kind = serializers.CharField(help_text="chat, test_run or delegation.")
    generation = serializers.IntegerField()
    agent_node_id = serializers.CharField()
    agent_name = serializers.CharField()
    provider = serializers.CharField(allow_blank=True)
    model = serializers.CharField(allow_blank=True)
    chat_run_id = serializers.IntegerField(allow_null=True)
    trigger = RunTriggerOutput(
        allow_null=True, help_text="The trigger that sent the message it answered; null for the owner's own."
    )
    parent_id = serializers.CharField(allow_null=True)
    state = serializers.CharField()
    end_reason = serializers.CharField(allow_blank=True)
    error_code = serializers.CharField(
        allow_blank=True, help_text="Why it failed: e.g. timed_out, agent_not_found, provider_<code>."
    )
    error_message = serializers.CharField(allow_blank=True)
    iterations = serializers.IntegerField()
    tokens = serializers.IntegerField()
    prompt_preview = serializers.CharField(allow_blank=True)
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    duration_ms = serializers.IntegerField(allow_null=True)


class RunListItemOutput(RunSummaryOutput):
    steps = serializers.IntegerField()
    tool_calls = serializers.IntegerField()
    delegations = serializers.IntegerField()
    failed_steps = serializers.IntegerField(help_text="Steps that failed or are ambiguous (a worker lost mid-call).")


class RunDetailOutput(RunSummaryOutput):
    steps = RunStepOutput(many=True)
    tool_calls = RunToolCallOutput(many=True)
    cost = serializers.DecimalField(max_digits=14, decimal_places=6, allow_null=True)
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    answer = serializers.CharField(allow_blank=True)
    delegations = serializers.ListField(child=serializers.JSONField(), help_text="Nested run details of teammates.")


class WorkflowTestRunApi(APIView):
    # A test run is a provider call like a chat send: it counts against the same per-user limit (core/throttles.py).
    throttle_scope = "chat_send"

    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "WorkflowTestRunInput"

        prompt = serializers.CharField(max_length=100_000)

    class OutputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "WorkflowTestRunOutput"

        firing_id = serializers.CharField()
        run_url = serializers.CharField()

    @extend_schema(
        operation_id="workflows_test_run",
        request=InputSerializer,
        responses={202: OutputSerializer, **_BAD, **_NOT_FOUND},
        description="The manual run: the saved draft's answering agent answers on generation 0, which stores no "
        "conversation and leaves the live generation and the chat alone. Follow it at `run_url`.",
    )
    def post(self, request, workflow_id: int):
        workflow = access_workflow(user=request.user, workflow_id=workflow_id)
        payload = self.InputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        firing_id = firing_test_run(workflow=workflow, prompt=payload.validated_data["prompt"])
        body = {"firing_id": str(firing_id), "run_url": f"/api/workflows/{workflow.pk}/runs/{firing_id}/"}
        return Response(self.OutputSerializer(body).data, status=status.HTTP_202_ACCEPTED)


class WorkflowRunsApi(APIView):
    @extend_schema(
        operation_id="workflows_runs_list",
        parameters=[
            OpenApiParameter("generation", int, required=False, description="Only this generation (0: test runs)."),
            OpenApiParameter("limit", int, required=False, description="At most this many (default 50, max 200)."),
            OpenApiParameter(
                "trigger",
                str,
                required=False,
                description="Only the answers to one schedule or webhook trigger (its node id), or `chat` for the "
                "answers to the owner's own messages. A node id that never fired: an empty list.",
            ),
        ],
        responses={200: RunListItemOutput(many=True), **_BAD, **_NOT_FOUND},
        description="Recent top-level firings (chat answers, test runs), newest first; each answer to a schedule or "
        "webhook trigger names it (`trigger`).",
    )
    def get(self, request, workflow_id: int):
        workflow = access_workflow(user=request.user, workflow_id=workflow_id)
        generation = _int_param(request, "generation", None, 0, 1_000_000_000)
        limit = _int_param(request, "limit", 50, 1, 200)
        trigger = _trigger_param(request)
        rows = workflow_runs(workflow=workflow, limit=limit, generation=generation, trigger=trigger)
        return Response(RunListItemOutput(rows, many=True).data)


class WorkflowRunDetailApi(APIView):
    @extend_schema(
        operation_id="workflows_runs_retrieve",
        responses={200: RunDetailOutput, **_NOT_FOUND},
        description="One firing with its steps (duration, tokens, cost, ledger outcome), tool calls and the "
        "teammates it delegated to, nested.",
    )
    def get(self, request, workflow_id: int, firing_id: str):
        workflow = access_workflow(user=request.user, workflow_id=workflow_id)
        detail = workflow_run_detail(workflow=workflow, firing_id=firing_id)
        if detail is None:
            raise NotFoundError(message="Run not found.")
        return Response(RunDetailOutput(detail).data)


def _int_param(request, name: str, default, low: int, high: int):
    raw = request.query_params.get(name)
    if raw in (None, ""):
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ServiceError("invalid_request", f"`{name}` must be an integer.") from None
    return min(max(value, low), high)


def _trigger_param(request) -> str | None:
    raw = request.query_params.get("trigger")
    if raw in (None, ""):
        return None
    if len(raw) > 200:
        raise ServiceError("invalid_request", "`trigger` is a node id (at most 200 characters) or `chat`.")
    return raw
