"""One run (an answer being worked on): read it, stop it, see what it was sent."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from workflows.selectors import access_workflow

from .. import selectors, services
from .serializers import ERROR_RESPONSE, RunOutputSerializer


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
