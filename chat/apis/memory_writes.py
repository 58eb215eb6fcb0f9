"""What the answers saved to memory, per run or per branch, and taking it back."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from memory.history import memory_run_writes, memory_run_writes_undo, memory_runs_created_forget
from workflows.selectors import access_workflow

from .. import selectors
from .serializers import ERROR_RESPONSE

MEMORY_WRITES = inline_serializer(
    "ChatMemoryWrites",
    fields={"writes": serializers.ListField(child=serializers.DictField()), "count": serializers.IntegerField()},
)


class ChatRunMemoryApi(APIView):
    @extend_schema(
        operation_id="chat_run_memory_writes",
        summary="What this answer's agents saved to memory (each version with its provenance)",
        responses={200: MEMORY_WRITES, 404: ERROR_RESPONSE},
    )
    def get(self, request, workflow_id: int, run_id: int):
        workflow = access_workflow(user=request.user, workflow_id=workflow_id)
        run_ids = [selectors.chat_run_id_of(workflow=workflow, run_id=run_id)]
        writes = memory_run_writes(owner=request.user, workflow=workflow, chat_run_ids=run_ids)
        return Response({"writes": writes, "count": len(writes)})


class ChatRunMemoryUndoApi(APIView):
    @extend_schema(
        operation_id="chat_run_memory_undo",
        summary="Undo what this answer saved to memory: new items forgotten, changed items restored (new versions)",
        request=None,
        responses={
            200: inline_serializer(
                "ChatMemoryUndo",
                fields={
                    "restored": serializers.ListField(child=serializers.IntegerField()),
                    "forgotten": serializers.ListField(child=serializers.IntegerField()),
                    "already_gone": serializers.ListField(child=serializers.IntegerField()),
                },
            ),
            404: ERROR_RESPONSE,
        },
    )
    def post(self, request, workflow_id: int, run_id: int):
        workflow = access_workflow(user=request.user, workflow_id=workflow_id)
        run_pk = selectors.chat_run_id_of(workflow=workflow, run_id=run_id)
        return Response(memory_run_writes_undo(owner=request.user, workflow=workflow, chat_run_id=run_pk))


class ChatBranchMemoryApi(APIView):
    @extend_schema(
        operation_id="chat_branch_memory_writes",
        summary="What the answers on a branch (this message and everything under it) saved to memory",
        responses={200: MEMORY_WRITES, 404: ERROR_RESPONSE},
    )
    def get(self, request, workflow_id: int, message_id: int):
        workflow = access_workflow(user=request.user, workflow_id=workflow_id)
        run_ids = selectors.chat_branch_run_ids(workflow=workflow, message_id=message_id)
        writes = memory_run_writes(owner=request.user, workflow=workflow, chat_run_ids=run_ids)
        return Response({"writes": writes, "count": len(writes)})

    @extend_schema(
        operation_id="chat_branch_memory_forget",
        summary="Forget the memories the answers on a branch created (and nothing else)",
        request=None,
        responses={
            200: inline_serializer(
                "ChatBranchMemoryForget", fields={"forgotten": serializers.ListField(child=serializers.IntegerField())}
            ),
            404: ERROR_RESPONSE,
        },
    )
    def post(self, request, workflow_id: int, message_id: int):
        workflow = access_workflow(user=request.user, workflow_id=workflow_id)
        run_ids = selectors.chat_branch_run_ids(workflow=workflow, message_id=message_id)
        return Response(memory_runs_created_forget(owner=request.user, workflow=workflow, chat_run_ids=run_ids))
