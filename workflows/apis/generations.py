"""Running a workflow: Start, Stop, Reset and the list of its generations."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from core.fields import StrictIntegerField
from core.idempotency import idempotent

from .. import services
from ..selectors import access_workflow, workflow_generations
from .serializers import BAD_GRAPH, NOT_FOUND, ConflictOutput, ErrorOutput, GenerationOutput


class WorkflowStartApi(APIView):
    class OutputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "WorkflowStartOutput"

        generation = GenerationOutput()
        created = serializers.BooleanField(help_text="False when the unchanged graph was already running.")

    @extend_schema(
        operation_id="workflows_start",
        request=None,
        responses={200: OutputSerializer, **BAD_GRAPH, **NOT_FOUND, 409: ErrorOutput},
    )
    @idempotent
    def post(self, request, workflow_id: int):
        workflow = access_workflow(user=request.user, workflow_id=workflow_id)
        generation, created = services.workflow_start(workflow=workflow)
        return Response(self.OutputSerializer({"generation": generation, "created": created}).data)


class WorkflowStopApi(APIView):
    class OutputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "WorkflowStopOutput"

        generation = GenerationOutput(allow_null=True)

    @extend_schema(operation_id="workflows_stop", request=None, responses={200: OutputSerializer, **NOT_FOUND})
    def post(self, request, workflow_id: int):
        workflow = access_workflow(user=request.user, workflow_id=workflow_id)
        return Response(self.OutputSerializer({"generation": services.workflow_stop(workflow=workflow)}).data)


class WorkflowResetApi(APIView):
    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "WorkflowResetInput"

        expected_generation = StrictIntegerField(
            required=False,
            min_value=0,
            help_text="The generation being reset; a retried reset of it returns the first result.",
        )

    class OutputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "WorkflowResetOutput"

        generation = GenerationOutput()
        previous_generation = serializers.IntegerField()
        replayed = serializers.BooleanField()
        report = serializers.JSONField()

    @extend_schema(
        operation_id="workflows_reset",
        request=InputSerializer,
        responses={200: OutputSerializer, **BAD_GRAPH, **NOT_FOUND, 409: ConflictOutput},
    )
    @idempotent
    def post(self, request, workflow_id: int):
        workflow = access_workflow(user=request.user, workflow_id=workflow_id)
        payload = self.InputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        outcome = services.workflow_reset(
            workflow=workflow, actor=request.user, expected_generation=payload.validated_data.get("expected_generation")
        )
        data = {
            "generation": outcome.generation,
            "previous_generation": outcome.previous_generation,
            "replayed": outcome.replayed,
            "report": outcome.report,
        }
        return Response(self.OutputSerializer(data).data)


class WorkflowGenerationsApi(APIView):
    @extend_schema(
        operation_id="workflows_generations_list",
        responses={200: GenerationOutput(many=True), **NOT_FOUND},
        description="The workflow's generations, newest first (at most 50).",
    )
    def get(self, request, workflow_id: int):
        workflow = access_workflow(user=request.user, workflow_id=workflow_id)
        return Response(GenerationOutput(workflow_generations(workflow=workflow)[:50], many=True).data)
