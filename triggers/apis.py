"""REST for webhook triggers: make or remake a hook's secret address (shown once), and its state."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from workflows.selectors import access_workflow

from .selectors import webhook_address_state
from .webhooks import webhook_address_issue

ERROR_RESPONSE = inline_serializer(
    "WebhookError", fields={"code": serializers.CharField(), "message": serializers.CharField()}
)


class WebhookAddressSerializer(serializers.Serializer):
    exists = serializers.BooleanField()
    hint = serializers.CharField(allow_blank=True, help_text="The address's last characters")
    url = serializers.CharField(allow_null=True, help_text="The full address: only in the answer that made it")


class WebhookAddressApi(APIView):
    @extend_schema(
        operation_id="webhook_address",
        summary="A webhook trigger's address (hint only)",
        responses={200: WebhookAddressSerializer, 404: ERROR_RESPONSE},
    )
    def get(self, request, workflow_id: int, node_id: str):
        workflow = access_workflow(user=request.user, workflow_id=workflow_id)
        return Response(WebhookAddressSerializer(webhook_address_state(workflow=workflow, node_id=node_id)).data)

    @extend_schema(
        operation_id="webhook_address_issue",
        summary="Make (or Regenerate) a webhook trigger's secret address; shown once",
        request=None,
        responses={201: WebhookAddressSerializer, 404: ERROR_RESPONSE},
    )
    def post(self, request, workflow_id: int, node_id: str):
        workflow = access_workflow(user=request.user, workflow_id=workflow_id)
        hook, token = webhook_address_issue(workflow=workflow, node_id=node_id)
        url = request.build_absolute_uri(f"/hooks/{token}/")
        return Response(WebhookAddressSerializer({"exists": True, "hint": hook.hint, "url": url}).data, status=201)
