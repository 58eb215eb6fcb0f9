"""The node-type catalogue the editor builds its palette and forms from."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from ..node_types import node_type_catalogue


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
