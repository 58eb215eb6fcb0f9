"""Add a teammate to a lead agent."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from core.fields import StrictCharField, StrictFloatField, StrictIntegerField

from .. import services
from ..selectors import access_workflow
from .serializers import BAD_GRAPH, NOT_FOUND, ConflictOutput, WorkflowOutput, workflow_data


class WorkflowSubagentApi(APIView):
    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "WorkflowSubagentInput"

        lead_node_id = StrictCharField(max_length=255)
        params = serializers.DictField(help_text="The teammate's agent params (provider, model, name, ...).")
        revision = StrictIntegerField(required=False, min_value=0)
        position = inline_serializer(
            "SubagentPosition", fields={"x": StrictFloatField(), "y": StrictFloatField()}, required=False
        )

    class OutputSerializer(WorkflowOutput):
        class Meta:
            ref_name = "WorkflowSubagentOutput"

        subagent_node_id = serializers.CharField()
        context_node_id = serializers.CharField()

    @extend_schema(
        operation_id="workflows_subagents_create",
        request=InputSerializer,
        responses={201: OutputSerializer, **BAD_GRAPH, **NOT_FOUND, 409: ConflictOutput},
        description="Add a teammate agent wired as the lead's tool, with a fresh Context wired to the teammate.",
    )
    def post(self, request, workflow_id: int):
        workflow = access_workflow(user=request.user, workflow_id=workflow_id)
        payload = self.InputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        outcome = services.workflow_add_subagent(
            workflow=workflow,
            lead_node_id=data["lead_node_id"],
            spec=data["params"],
            revision=data.get("revision"),
            position=dict(data["position"]) if data.get("position") else None,
        )
        body = workflow_data(outcome, **outcome.extra)
        return Response(self.OutputSerializer(body).data, status=status.HTTP_201_CREATED)
