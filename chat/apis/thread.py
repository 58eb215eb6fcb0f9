"""The thread as a whole: read it, clear it."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from workflows.selectors import access_workflow

from .. import services
from .serializers import ERROR_RESPONSE, REFUSALS, ThreadOutputSerializer, thread_data


class ChatThreadApi(APIView):
    @extend_schema(
        operation_id="chat_thread",
        summary="The chat: active path, versions and runs",
        responses={200: ThreadOutputSerializer, 404: ERROR_RESPONSE},
    )
    def get(self, request, workflow_id: int):
        workflow = access_workflow(user=request.user, workflow_id=workflow_id)
        return Response(thread_data(workflow))


class ChatClearApi(APIView):
    class OutputSerializer(serializers.Serializer):
        messages = serializers.IntegerField()
        runs = serializers.IntegerField()
        snapshots = serializers.IntegerField()
        notes = serializers.IntegerField()
        feedback = serializers.IntegerField()
        conversations = serializers.IntegerField()

    @extend_schema(
        operation_id="chat_clear",
        summary="Clear chat: messages, runs, snapshots, notes, feedback; the agents forget the conversation",
        request=None,
        responses={200: OutputSerializer, **REFUSALS},
    )
    def post(self, request, workflow_id: int):
        workflow = access_workflow(user=request.user, workflow_id=workflow_id)
        return Response(self.OutputSerializer(services.chat_clear(workflow=workflow)).data)
