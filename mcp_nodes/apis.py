"""REST for MCP server nodes: Test connection (list the server's tools)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from workflows.selectors import access_workflow

from .discovery import mcp_server_tools_discover, stdio_servers_list

ERROR_RESPONSE = inline_serializer(
    "McpServerError", fields={"code": serializers.CharField(), "message": serializers.CharField()}
)


class ListedToolSerializer(serializers.Serializer):
    name = serializers.CharField()
    description = serializers.CharField(allow_blank=True)
    input_schema = serializers.JSONField()
    annotations = serializers.JSONField(help_text="MCP annotations: readOnlyHint, destructiveHint, ...")
    digest = serializers.CharField(help_text="sha256 of name, description and schema: what a generation pins")
    ticked = serializers.BooleanField()
    changed = serializers.BooleanField(help_text="Ticked, and the server's tool differs from the one the node pinned")


class McpServerToolsApi(APIView):
    class InputSerializer(serializers.Serializer):
        params = serializers.JSONField(required=False, help_text="The node's params as edited (else the saved ones)")

    class OutputSerializer(serializers.Serializer):
        server = serializers.CharField()
        tools = ListedToolSerializer(many=True)
        missing = serializers.ListField(
            child=serializers.CharField(), help_text="Ticked tools the server no longer has"
        )

    @extend_schema(
        operation_id="mcp_server_tools",
        summary="Test connection: the tools the node's MCP server lists",
        request=InputSerializer,
        responses={200: OutputSerializer, 400: ERROR_RESPONSE, 404: ERROR_RESPONSE},
    )
    def post(self, request, workflow_id: int, node_id: str):
        # Ownership first: another owner's workflow is a 404 whatever the body says.
        workflow = access_workflow(user=request.user, workflow_id=workflow_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        params = data.validated_data.get("params")
        if params is not None and not isinstance(params, dict):
            params = {"__invalid__": True}
        outcome = mcp_server_tools_discover(user=request.user, workflow=workflow, node_id=node_id, params=params)
        return Response(self.OutputSerializer(outcome).data)


class McpStdioServersApi(APIView):
    class OutputSerializer(serializers.Serializer):
        name = serializers.CharField()
        label = serializers.CharField()

    @extend_schema(
        operation_id="mcp_stdio_servers",
        summary="The stdio MCP servers the operator lists (names only: an owner picks one, never a command)",
        responses={200: OutputSerializer(many=True)},
    )
    def get(self, request):
        return Response(self.OutputSerializer(stdio_servers_list(), many=True).data)
