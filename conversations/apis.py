"""REST handlers of the Context panel: owner-scoped, paginated, metadata first (docs/invariants.md#panel-live-only)."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from core.errors import NotFoundError
from core.schema import ErrorResponse
from workflows.selectors import access_workflow

from . import selectors
from .services import conversation_context_clear, owner_conversation_settings_update
from .store import list_conversations


class _PageInput(serializers.Serializer):
    offset = serializers.IntegerField(min_value=0, default=0, help_text="First item (0-based).")
    limit = serializers.IntegerField(
        min_value=1, max_value=1000, required=False, help_text="Page size (default CONVERSATION_API_PAGE_SIZE)."
    )

    def page(self) -> tuple[int, int]:
        data = self.validated_data
        return data["offset"], min(data.get("limit") or settings.CONVERSATION_API_PAGE_SIZE, 1000)


# The serializer itself is the parameter list, so the published bounds (limit 1..1000) are the enforced ones.
_PAGE_PARAMETERS = [_PageInput]


class _PressureOutput(serializers.Serializer):
    input_tokens = serializers.IntegerField()
    output_headroom_tokens = serializers.IntegerField()
    context_window_tokens = serializers.IntegerField(allow_null=True)
    fraction = serializers.FloatField(allow_null=True)
    measured_at = serializers.DateTimeField(allow_null=True)


class ConversationListApi(APIView):
    class OutputSerializer(serializers.Serializer):
        generation = serializers.IntegerField()
        agent_node_id = serializers.CharField()
        message_count = serializers.IntegerField()
        size_bytes = serializers.IntegerField()
        updated_at = serializers.DateTimeField()
        live = serializers.BooleanField()

    class PageSerializer(serializers.Serializer):
        count = serializers.IntegerField()
        offset = serializers.IntegerField()
        limit = serializers.IntegerField()
        results = serializers.ListField(child=serializers.DictField())

    @extend_schema(
        summary="Stored conversations of a workflow (metadata only)",
        parameters=_PAGE_PARAMETERS,
        responses={200: PageSerializer, 400: ErrorResponse},
    )
    def get(self, request, workflow_id: int):
        workflow = access_workflow(user=request.user, workflow_id=workflow_id)
        page = _PageInput(data=request.query_params)
        page.is_valid(raise_exception=True)
        offset, limit = page.page()
        rows = list_conversations(workflow)
        for row in rows:
            row["live"] = row["generation"] == workflow.live_generation and workflow.live_generation > 0
        results = self.OutputSerializer(rows[offset : offset + limit], many=True).data
        return Response({"count": len(rows), "offset": offset, "limit": limit, "results": results})


def _agent_node_workflow_or_404(request, workflow_id: int, agent_node_id: str):
    """The workflow, once the node is one of its own: another workflow's node id is a 404 like a missing one."""
    workflow = access_workflow(user=request.user, workflow_id=workflow_id)
    if not selectors.workflow_has_node(workflow, agent_node_id):
        raise NotFoundError(message="No such node in this workflow.")
    return workflow


class ConversationDetailApi(APIView):
    class OutputSerializer(serializers.Serializer):
        workflow_id = serializers.IntegerField()
        generation = serializers.IntegerField()
        agent_node_id = serializers.CharField()
        message_count = serializers.IntegerField()
        size_bytes = serializers.IntegerField()
        updated_at = serializers.DateTimeField(allow_null=True)
        pressure = _PressureOutput(allow_null=True)
        usage = serializers.DictField()
        offset = serializers.IntegerField()
        limit = serializers.IntegerField()
        next_offset = serializers.IntegerField(allow_null=True)
        messages = serializers.ListField(child=serializers.DictField(), help_text="Stored MessageWire dicts, in order.")
        runtime = serializers.DictField(
            allow_null=True,
            help_text=(
                "The agent's provider, its fidelity ({label, detail}: what is kept) and its binding or "
                "null: for Claude Code the session (session_id, transcript_path); for a Vertex agent the interaction "
                "the next firing continues (interaction_id, environment_id; Google keeps the interaction state "
                "server-side)."
            ),
        )

    class DeleteOutputSerializer(serializers.Serializer):
        deleted = serializers.IntegerField()

    @extend_schema(
        summary="The live generation's stored conversation of one agent (paginated messages)",
        parameters=_PAGE_PARAMETERS,
        responses={200: OutputSerializer, 400: ErrorResponse, 404: ErrorResponse},
    )
    def get(self, request, workflow_id: int, agent_node_id: str):
        workflow = _agent_node_workflow_or_404(request, workflow_id, agent_node_id)
        page = _PageInput(data=request.query_params)
        page.is_valid(raise_exception=True)
        offset, limit = page.page()
        header = selectors.live_conversation_header(workflow, agent_node_id)
        rows = selectors.conversation_message_rows(header, offset=offset, limit=limit) if header else []
        count = header.message_count if header else 0
        data = {
            "workflow_id": workflow.pk,
            "generation": workflow.live_generation,
            "agent_node_id": agent_node_id,
            "message_count": count,
            "size_bytes": header.size_bytes if header else 0,
            "updated_at": header.updated_at if header else None,
            "pressure": selectors.pressure_of(header),
            "usage": selectors.usage_totals(
                workflow_id=workflow.pk, generation=workflow.live_generation, agent_node_id=agent_node_id
            ),
            "offset": offset,
            "limit": limit,
            "next_offset": offset + limit if offset + limit < count else None,
            "messages": [row["message"] for row in rows],
            "runtime": selectors.agent_runtime(workflow, agent_node_id),
        }
        return Response(self.OutputSerializer(data).data)

    @extend_schema(
        summary="Clear the live generation's stored conversation of one agent",
        responses={200: DeleteOutputSerializer, 404: ErrorResponse},
    )
    def delete(self, request, workflow_id: int, agent_node_id: str):
        workflow = _agent_node_workflow_or_404(request, workflow_id, agent_node_id)
        return Response({"deleted": conversation_context_clear(workflow=workflow, agent_node_id=agent_node_id)})


class OwnerConversationSettingsApi(APIView):
    """The signed-in owner's own conversation limits (they may lower the site's, never raise them)."""

    class InputSerializer(serializers.Serializer):
        tool_result_max_chars = serializers.IntegerField(allow_null=True, min_value=100)

    class OutputSerializer(serializers.Serializer):
        tool_result_max_chars = serializers.IntegerField(allow_null=True)
        effective_tool_result_max_chars = serializers.IntegerField()
        site_tool_result_max_chars = serializers.IntegerField()

    def _output(self, request) -> dict:
        return self.OutputSerializer(
            {
                "tool_result_max_chars": selectors.owner_own_tool_result_max_chars(request.user.pk),
                "effective_tool_result_max_chars": selectors.owner_tool_result_max_chars(request.user.pk),
                "site_tool_result_max_chars": settings.TOOL_RESULT_MAX_CHARS,
            }
        ).data

    @extend_schema(responses={200: OutputSerializer})
    def get(self, request):
        return Response(self._output(request))

    @extend_schema(request=InputSerializer, responses={200: OutputSerializer, 400: ErrorResponse})
    def put(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        owner_conversation_settings_update(owner=request.user, **data.validated_data)
        return Response(self._output(request))
