"""The workflows REST API: thin views over services and selectors; errors via opencompany.errors."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, extend_schema_field, inline_serializer
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from opencompany.errors import ServiceError
from opencompany.fields import StrictCharField, StrictFloatField, StrictIntegerField
from opencompany.idempotency import idempotent

from . import services
from .graph import GraphShapeError, normalize_workflow_graph, validate_workflow_graph
from .graph.shape import GRAPH_JSON_SCHEMA, graph_nul_path, graph_shape_errors
from .graph.validate import graph_size_issues
from .models import WorkflowGeneration
from .node_types import node_type_catalogue
from .selectors import access_workflow, workflow_export, workflow_generations, workflows_for_owner

# --- shared serializers -------------------------------------------------------------------------------------


class ErrorOutput(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()


class ConflictOutput(ErrorOutput):
    current_revision = serializers.IntegerField(required=False)
    current_generation = serializers.IntegerField(required=False)
    retry = serializers.BooleanField(required=False, help_text="`reset_busy`: nothing changed; send it again.")


class IssueOutput(serializers.Serializer):
    code = serializers.CharField()
    severity = serializers.ChoiceField(choices=["error", "warning"])
    message = serializers.CharField()
    node_id = serializers.CharField(required=False)
    edge_id = serializers.CharField(required=False)
    field = serializers.CharField(required=False)


class InvalidGraphOutput(ErrorOutput):
    issues = IssueOutput(many=True, required=False)


class PositionOutput(serializers.Serializer):
    x = serializers.FloatField()
    y = serializers.FloatField()


class NodeOutput(serializers.Serializer):
    id = serializers.CharField()
    type = serializers.CharField()
    params = serializers.DictField()
    position = PositionOutput(required=False)


class EdgeOutput(serializers.Serializer):
    id = serializers.CharField()
    source = serializers.CharField(allow_null=True)
    sourceHandle = serializers.CharField(allow_null=True)  # noqa: N815 - the wire name
    target = serializers.CharField(allow_null=True)
    targetHandle = serializers.CharField(allow_null=True)  # noqa: N815


class GraphOutput(serializers.Serializer):
    nodes = NodeOutput(many=True)
    edges = EdgeOutput(many=True)


@extend_schema_field(GRAPH_JSON_SCHEMA)
class GraphInputField(serializers.JSONField):
    """The whole document's shape is checked here, before any service sees it: a wrong type anywhere is a 400
    with one error per field path and nothing is saved (workflows/graph/shape.py says why)."""

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        errors = graph_shape_errors(value)
        if "" in errors:
            raise serializers.ValidationError(errors[""])
        if errors:
            raise serializers.ValidationError(errors)  # {"nodes[0].type": [...], ...} under `errors.graph`
        return value


class LegacyImportOutput(serializers.Serializer):
    kind = serializers.CharField()
    agent_node_id = serializers.CharField()
    context_node_id = serializers.CharField()
    memory_node_id = serializers.CharField()
    transcript_chars = serializers.IntegerField()


class GenerationOutput(serializers.Serializer):
    number = serializers.IntegerField()
    state = serializers.ChoiceField(choices=WorkflowGeneration.State.choices)
    admitted_by = serializers.ChoiceField(choices=WorkflowGeneration.AdmittedBy.choices)
    graph_revision = serializers.IntegerField()
    started_at = serializers.DateTimeField()
    ended_at = serializers.DateTimeField(allow_null=True)


class WorkflowOutput(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    graph = GraphOutput()
    graph_version = serializers.IntegerField()
    revision = serializers.IntegerField()
    live_generation = serializers.IntegerField()
    live_state = serializers.CharField(allow_null=True)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    aliases = serializers.DictField(child=serializers.CharField())
    warnings = IssueOutput(many=True)
    legacy_imports = LegacyImportOutput(many=True)


def _workflow_data(outcome: services.GraphOutcome, **extra) -> dict:
    workflow = outcome.workflow
    live = services.live_generation_of(workflow)
    data = {
        "id": workflow.pk,
        "name": workflow.name,
        "graph": workflow.graph,
        "graph_version": workflow.graph_version,
        "revision": workflow.revision,
        "live_generation": workflow.live_generation,
        "live_state": live.state if live else None,
        "created_at": workflow.created_at,
        "updated_at": workflow.updated_at,
        "aliases": outcome.aliases,
        "warnings": outcome.warnings,
        "legacy_imports": outcome.legacy_imports,
        **extra,
    }
    return data


_NOT_FOUND = {404: ErrorOutput}
_BAD = {400: InvalidGraphOutput}


# --- views --------------------------------------------------------------------------------------------------


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

    @extend_schema(operation_id="workflows_create", request=InputSerializer, responses={201: WorkflowOutput, **_BAD})
    def post(self, request):
        payload = self.InputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        outcome = services.workflow_create(owner=request.user, **payload.validated_data)
        return Response(WorkflowOutput(_workflow_data(outcome)).data, status=status.HTTP_201_CREATED)


class WorkflowDetailApi(APIView):
    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "WorkflowDetailInput"

        name = StrictCharField(max_length=200, required=False)
        graph = GraphInputField()
        revision = StrictIntegerField(min_value=0, help_text="The revision this edit started from.")

    @extend_schema(operation_id="workflows_retrieve", responses={200: WorkflowOutput, **_NOT_FOUND})
    def get(self, request, workflow_id: int):
        workflow = access_workflow(user=request.user, workflow_id=workflow_id)
        return Response(WorkflowOutput(_workflow_data(services.workflow_load(workflow=workflow))).data)

    @extend_schema(
        operation_id="workflows_update",
        request=InputSerializer,
        responses={200: WorkflowOutput, **_BAD, **_NOT_FOUND, 409: ConflictOutput},
    )
    def put(self, request, workflow_id: int):
        workflow = access_workflow(user=request.user, workflow_id=workflow_id)
        payload = self.InputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        outcome = services.workflow_save(workflow=workflow, **payload.validated_data)
        return Response(WorkflowOutput(_workflow_data(outcome)).data)

    @extend_schema(operation_id="workflows_destroy", responses={204: None, **_NOT_FOUND})
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
        responses={200: OutputSerializer, **_BAD, **_NOT_FOUND},
        description="Normalize and validate a draft without saving it. Always 200; `valid` says whether a save "
        "would be accepted, `issues` lists the validator's codes.",
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
        data = {
            "valid": not any(i.severity == "error" for i in issues),
            "graph": result.graph,
            "aliases": result.aliases,
            "warnings": [w.as_dict() for w in result.warnings],
            "issues": [i.as_dict() for i in issues],
        }
        return Response(self.OutputSerializer(data).data)


class ExportOutput(serializers.Serializer):
    format = serializers.CharField()
    format_version = serializers.IntegerField()
    graph_version = serializers.IntegerField()
    name = serializers.CharField()
    graph = GraphOutput()


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
        responses={201: WorkflowOutput, **_BAD},
        description="Create a workflow from an export document (or any `{name?, graph}`). Ids are re-canonicalized "
        "for the new workflow and returned in `aliases`; legacy graphs are rewritten.",
    )
    def post(self, request):
        payload = self.InputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        outcome = services.workflow_import(owner=request.user, document=data, name=data.get("name"))
        return Response(WorkflowOutput(_workflow_data(outcome)).data, status=status.HTTP_201_CREATED)


class WorkflowExportApi(APIView):
    @extend_schema(
        operation_id="workflows_export",
        responses={200: ExportOutput, **_NOT_FOUND},
        description="The workflow's name and normalized graph. Never includes conversations, memory contents, todos, "
        "legacy transcripts or secrets.",
    )
    def get(self, request, workflow_id: int):
        workflow = access_workflow(user=request.user, workflow_id=workflow_id)
        return Response(ExportOutput(workflow_export(workflow=workflow)).data)


class WorkflowStartApi(APIView):
    class OutputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "WorkflowStartOutput"

        generation = GenerationOutput()
        created = serializers.BooleanField(help_text="False when the unchanged graph was already running.")

    @extend_schema(
        operation_id="workflows_start",
        request=None,
        responses={200: OutputSerializer, **_BAD, **_NOT_FOUND, 409: ErrorOutput},
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

    @extend_schema(operation_id="workflows_stop", request=None, responses={200: OutputSerializer, **_NOT_FOUND})
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
        responses={200: OutputSerializer, **_BAD, **_NOT_FOUND, 409: ConflictOutput},
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
        responses={201: OutputSerializer, **_BAD, **_NOT_FOUND, 409: ConflictOutput},
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
        body = _workflow_data(outcome, **outcome.extra)
        return Response(self.OutputSerializer(body).data, status=status.HTTP_201_CREATED)


class NodeTypesApi(APIView):
    class OutputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "NodeTypesOutput"

        types = serializers.ListField(
            child=serializers.JSONField(),
            help_text="Every registered node type: type, label, description, inputs/outputs (id, kind, direction, "
            "maxConnections, label), capabilities, palette (false for systemManaged), paramsSchema (JSON Schema), "
            "newParams, toolName, hasResetHook, panel.",
        )
        providers = serializers.ListField(
            child=serializers.JSONField(),
            help_text="The agent form's provider/model catalogue: id, label, models [{id, contextWindow, reasoning}], "
            "needsKey, configured.",
        )

    @extend_schema(
        operation_id="node_types_list",
        responses={200: OutputSerializer},
        description="The NodeSpec registry as data: the editor builds its palette and forms from this only.",
    )
    def get(self, request):
        return Response(self.OutputSerializer(node_type_catalogue()).data)


class WorkflowGenerationsApi(APIView):
    @extend_schema(
        operation_id="workflows_generations_list",
        responses={200: GenerationOutput(many=True), **_NOT_FOUND},
        description="The workflow's generations, newest first (at most 50).",
    )
    def get(self, request, workflow_id: int):
        workflow = access_workflow(user=request.user, workflow_id=workflow_id)
        return Response(GenerationOutput(workflow_generations(workflow=workflow)[:50], many=True).data)


class WorkflowDuplicateApi(APIView):
    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "WorkflowDuplicateInput"

        name = serializers.CharField(max_length=200, required=False)

    @extend_schema(
        operation_id="workflows_duplicate",
        request=InputSerializer,
        responses={201: WorkflowOutput, **_BAD, **_NOT_FOUND},
        description="A copy of the graph as a new, never-started workflow (no conversations, memory or todos).",
    )
    def post(self, request, workflow_id: int):
        workflow = access_workflow(user=request.user, workflow_id=workflow_id)
        payload = self.InputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        outcome = services.workflow_duplicate(workflow=workflow, name=payload.validated_data.get("name"))
        return Response(WorkflowOutput(_workflow_data(outcome)).data, status=status.HTTP_201_CREATED)
