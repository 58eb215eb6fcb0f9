"""The shapes the workflows API shares between its views: errors, issues, graphs, generations, a stored workflow."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from ..graph.shape import GRAPH_JSON_SCHEMA, graph_shape_errors
from ..models import WorkflowGeneration
from ..services import GraphOutcome, live_generation_of


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


class ExportOutput(serializers.Serializer):
    format = serializers.CharField()
    format_version = serializers.IntegerField()
    graph_version = serializers.IntegerField()
    name = serializers.CharField()
    graph = GraphOutput()


def workflow_data(outcome: GraphOutcome, **extra) -> dict:
    """A stored workflow as `WorkflowOutput` reads it, with what normalization said about the graph it was given."""
    workflow = outcome.workflow
    live = live_generation_of(workflow)
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


# The refusals most views document.
NOT_FOUND = {404: ErrorOutput}
BAD_GRAPH = {400: InvalidGraphOutput}
