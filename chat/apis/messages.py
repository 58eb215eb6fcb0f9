"""The owner's messages: send, edit, try again, switch versions, rate an answer."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from core.idempotency import idempotent
from workflows.selectors import access_workflow

from .. import selectors, services
from .serializers import (
    REFUSALS,
    MoveInputSerializer,
    RunOutputSerializer,
    ThreadOutputSerializer,
    file_ids_field,
    message_text_field,
    thread_data,
)


class ChatMessageSendApi(APIView):
    throttle_scope = "chat_send"  # core/throttles.py

    class InputSerializer(serializers.Serializer):
        text = message_text_field()
        client_message_id = serializers.CharField(required=False, allow_blank=True, max_length=100)
        expected_revision = serializers.IntegerField(required=False, allow_null=True)
        file_ids = file_ids_field()

    class OutputSerializer(serializers.Serializer):
        message_id = serializers.IntegerField()
        run = RunOutputSerializer()
        created = serializers.BooleanField(help_text="False when client_message_id was seen before (nothing started).")
        revision = serializers.IntegerField()

    @extend_schema(
        operation_id="chat_message_send",
        summary="Send a message and start its answer",
        request=InputSerializer,
        responses={201: OutputSerializer, 200: OutputSerializer, **REFUSALS},
    )
    @idempotent
    def post(self, request, workflow_id: int):
        workflow = access_workflow(user=request.user, workflow_id=workflow_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        message, run, created = services.chat_message_send(workflow=workflow, **data.validated_data)
        return Response(
            self.OutputSerializer(
                {
                    "message_id": message.pk,
                    "run": selectors.run_data(run, workflow=workflow),
                    "created": created,
                    "revision": message.session.revision,
                }
            ).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )


class ChatMessageEditApi(APIView):
    throttle_scope = "chat_send"  # core/throttles.py

    class InputSerializer(serializers.Serializer):
        text = message_text_field()
        expected_revision = serializers.IntegerField(required=False, allow_null=True)
        client_message_id = serializers.CharField(required=False, allow_blank=True, max_length=100)
        file_ids = file_ids_field()  # omitted: the new version keeps the edited message's files

    class OutputSerializer(serializers.Serializer):
        message_id = serializers.IntegerField()
        run = RunOutputSerializer()

    @extend_schema(
        operation_id="chat_message_edit",
        summary="Edit one of your messages: the new version is answered, the agents forget the old branch",
        request=InputSerializer,
        responses={201: OutputSerializer, **REFUSALS},
    )
    @idempotent
    def post(self, request, workflow_id: int, message_id: int):
        workflow = access_workflow(user=request.user, workflow_id=workflow_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        message, run = services.chat_message_edit(workflow=workflow, message_id=message_id, **data.validated_data)
        return Response(
            self.OutputSerializer({"message_id": message.pk, "run": selectors.run_data(run, workflow=workflow)}).data,
            status=status.HTTP_201_CREATED,
        )


class ChatMessageRegenerateApi(APIView):
    throttle_scope = "chat_send"  # core/throttles.py

    @extend_schema(
        operation_id="chat_message_regenerate",
        summary="Try again: answer the latest message again, beside the latest answer",
        request=MoveInputSerializer,
        responses={201: RunOutputSerializer, **REFUSALS},
    )
    @idempotent
    def post(self, request, workflow_id: int, message_id: int):
        workflow = access_workflow(user=request.user, workflow_id=workflow_id)
        data = MoveInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        run = services.chat_message_regenerate(workflow=workflow, message_id=message_id, **data.validated_data)
        return Response(
            RunOutputSerializer(selectors.run_data(run, workflow=workflow)).data, status=status.HTTP_201_CREATED
        )


class ChatMessageSwitchApi(APIView):
    @extend_schema(
        operation_id="chat_message_switch",
        summary="Show another version of a message (‹ ›); the agents' conversations follow",
        request=MoveInputSerializer,
        responses={200: ThreadOutputSerializer, **REFUSALS},
    )
    @idempotent
    def post(self, request, workflow_id: int, message_id: int):
        workflow = access_workflow(user=request.user, workflow_id=workflow_id)
        data = MoveInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        services.chat_message_switch(workflow=workflow, message_id=message_id, **data.validated_data)
        return Response(thread_data(workflow))


class ChatMessageFeedbackApi(APIView):
    class InputSerializer(serializers.Serializer):
        rating = serializers.ChoiceField(choices=["good", "bad"], allow_null=True, allow_blank=True)

    class OutputSerializer(serializers.Serializer):
        message_id = serializers.IntegerField()
        rating = serializers.ChoiceField(choices=["good", "bad"], allow_null=True)

    @extend_schema(
        operation_id="chat_message_feedback",
        summary="Rate an answer good or bad (null takes it back); the agent hears of it with the next message",
        request=InputSerializer,
        responses={200: OutputSerializer, **REFUSALS},
    )
    def post(self, request, workflow_id: int, message_id: int):
        workflow = access_workflow(user=request.user, workflow_id=workflow_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        feedback = services.chat_feedback_set(
            workflow=workflow, message_id=message_id, rating=data.validated_data.get("rating") or None
        )
        return Response({"message_id": int(message_id), "rating": feedback.rating if feedback else None})
