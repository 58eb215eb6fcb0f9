"""The workflow documents: list, create, read, save, delete, validate a draft, import, export, duplicate."""

from __future__ import annotations

import re

from django.utils.http import content_disposition_header
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from core.errors import ServiceError
from core.fields import StrictCharField, StrictIntegerField

from .. import services
from ..graph import GraphShapeError, normalize_workflow_graph, run_issues, validate_workflow_graph
from ..graph.shape import graph_nul_path
from ..graph.validate import graph_size_issues
from ..selectors import access_workflow, workflow_export, workflows_for_owner
from .serializers import (
    BAD_GRAPH,
    NOT_FOUND,
    ConflictOutput,
    ExportOutput,
    GraphInputField,
    GraphOutput,
    IssueOutput,
    WorkflowOutput,
    workflow_data,
)


def export_file_stem(name: str) -> str:
    """The workflow's name as a file name: what no file system takes (separators, control characters) becomes -."""
    return re.sub(r'[\\/:*?"<>|\x00-\x1f\x7f]+', "-", name).strip(" .-")[:150] or "workflow"


class WorkflowListCreateApi(APIView):
    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "WorkflowListCreateInput"

        name = StrictCharField(max_length=200)
        graph = GraphInputField(required=False)

    class ListOutputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "WorkflowListCreateListItem"

        id = serializers.IntegerField()
        name = serializers.CharField()
        revision = serializers.IntegerField()
        live_generation = serializers.IntegerField()
        node_count = serializers.IntegerField()
        edge_count = serializers.IntegerField()
        created_at = serializers.DateTimeField()
        updated_at = serializers.DateTimeField()

    @extend_schema(operation_id="workflows_list", responses={200: ListOutputSerializer(many=True)})
    def get(self, request):
        rows = [
            {
                "id": w.pk,
                "name": w.name,
                "revision": w.revision,
                "live_generation": w.live_generation,
                "node_count": len((w.graph or {}).get("nodes", [])),
                "edge_count": len((w.graph or {}).get("edges", [])),
                "created_at": w.created_at,
                "updated_at": w.updated_at,
            }
            for w in workflows_for_owner(user=request.user)
        ]
        return Response(self.ListOutputSerializer(rows, many=True).data)

    @extend_schema(
        operation_id="workflows_create", request=InputSerializer, responses={201: WorkflowOutput, **BAD_GRAPH}
    )
    def post(self, request):
        payload = self.InputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        outcome = services.workflow_create(owner=request.user, **payload.validated_data)
        return Response(WorkflowOutput(workflow_data(outcome)).data, status=status.HTTP_201_CREATED)


class WorkflowDetailApi(APIView):
    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "WorkflowDetailInput"

        name = StrictCharField(max_length=200, required=False)
        graph = GraphInputField()
        revision = StrictIntegerField(min_value=0, help_text="The revision this edit started from.")

    @extend_schema(operation_id="workflows_retrieve", responses={200: WorkflowOutput, **NOT_FOUND})
    def get(self, request, workflow_id: int):
        workflow = access_workflow(user=request.user, workflow_id=workflow_id)
        return Response(WorkflowOutput(workflow_data(services.workflow_load(workflow=workflow))).data)

    @extend_schema(
        operation_id="workflows_update",
        request=InputSerializer,
        responses={200: WorkflowOutput, **BAD_GRAPH, **NOT_FOUND, 409: ConflictOutput},
    )
    def put(self, request, workflow_id: int):
        workflow = access_workflow(user=request.user, workflow_id=workflow_id)
        payload = self.InputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        outcome = services.workflow_save(workflow=workflow, **payload.validated_data)
        return Response(WorkflowOutput(workflow_data(outcome)).data)

    @extend_schema(operation_id="workflows_destroy", responses={204: None, **NOT_FOUND})
    def delete(self, request, workflow_id: int):
        workflow = access_workflow(user=request.user, workflow_id=workflow_id)
        services.workflow_delete(workflow=workflow)
        return Response(status=status.HTTP_204_NO_CONTENT)


class WorkflowValidateApi(APIView):
    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "WorkflowValidateInput"

        graph = GraphInputField()

    class OutputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "WorkflowValidateOutput"

        valid = serializers.BooleanField()
        graph = GraphOutput(allow_null=True)
        aliases = serializers.DictField(child=serializers.CharField())
        warnings = IssueOutput(many=True)
        issues = IssueOutput(many=True)

    @extend_schema(
        operation_id="workflows_validate",
        request=InputSerializer,
        responses={200: OutputSerializer, **BAD_GRAPH, **NOT_FOUND},
        description="Normalize and validate a draft without saving it. Always 200; `valid` says whether a save "
        "would be accepted, `issues` lists the validator's codes, and, for a savable draft, what Start would refuse "
        "(NO_ANSWERING_AGENT: no agent wired to the chat trigger).",
    )
    def post(self, request, workflow_id: int):
        workflow = access_workflow(user=request.user, workflow_id=workflow_id)
        payload = self.InputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        graph = payload.validated_data["graph"]
        nul_path = graph_nul_path(graph)
        if nul_path:
            raise ServiceError("invalid_graph", f"{nul_path} holds a NUL character, which cannot be stored.")
        size = graph_size_issues(graph)
        if size:
            data = {"valid": False, "graph": None, "aliases": {}, "warnings": [], "issues": [i.as_dict() for i in size]}
            return Response(self.OutputSerializer(data).data)
        try:
            result = normalize_workflow_graph(
                graph, workflow_id=workflow.pk, used_numbers=services.used_numbers(workflow)
            )
        except GraphShapeError as exc:
            raise ServiceError("invalid_graph", str(exc)) from None
        issues = validate_workflow_graph(result.graph)
        valid = not any(i.severity == "error" for i in issues)
        if valid:
            # Saving is allowed, but Start would refuse: Checks say so before the owner presses it.
            issues = issues + run_issues(result.graph)
        data = {
            "valid": valid,
            "graph": result.graph,
            "aliases": result.aliases,
            "warnings": [w.as_dict() for w in result.warnings],
            "issues": [i.as_dict() for i in issues],
        }
        return Response(self.OutputSerializer(data).data)


class WorkflowImportApi(APIView):
    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "WorkflowImportInput"

        name = StrictCharField(max_length=200, required=False)
        graph = GraphInputField()
        format = StrictCharField(required=False, max_length=100)
        format_version = StrictIntegerField(required=False)
        graph_version = StrictIntegerField(required=False)

    @extend_schema(
        operation_id="workflows_import",
        request=InputSerializer,
        responses={201: WorkflowOutput, **BAD_GRAPH},
        description="Create a workflow from an export document (or any `{name?, graph}`). Ids are re-canonicalized "
        "for the new workflow and returned in `aliases`; legacy graphs are rewritten.",
    )
    def post(self, request):
        payload = self.InputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        outcome = services.workflow_import(owner=request.user, document=data, name=data.get("name"))
        return Response(WorkflowOutput(workflow_data(outcome)).data, status=status.HTTP_201_CREATED)


class WorkflowExportApi(APIView):
    @extend_schema(
        operation_id="workflows_export",
        responses={200: ExportOutput, **NOT_FOUND},
        description="The workflow's name and normalized graph. Never includes conversations, memory contents, todos, "
        "legacy transcripts or secrets.",
    )
    def get(self, request, workflow_id: int):
        workflow = access_workflow(user=request.user, workflow_id=workflow_id)
        response = Response(ExportOutput(workflow_export(workflow=workflow)).data)
        # The editor's Export link saves the file under the workflow's name, not "export".
        response["Content-Disposition"] = content_disposition_header(
            as_attachment=True, filename=f"{export_file_stem(workflow.name)}.json"
        )
        return response


class WorkflowDuplicateApi(APIView):
    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "WorkflowDuplicateInput"

        name = serializers.CharField(max_length=200, required=False)

    @extend_schema(
        operation_id="workflows_duplicate",
        request=InputSerializer,
        responses={201: WorkflowOutput, **BAD_GRAPH, **NOT_FOUND},
        description="A copy of the graph as a new, never-started workflow (no conversations, memory or todos).",
    )
    def post(self, request, workflow_id: int):
        workflow = access_workflow(user=request.user, workflow_id=workflow_id)
        payload = self.InputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        outcome = services.workflow_duplicate(workflow=workflow, name=payload.validated_data.get("name"))
        return Response(WorkflowOutput(workflow_data(outcome)).data, status=status.HTTP_201_CREATED)
