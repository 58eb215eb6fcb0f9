"""REST for API tokens (list, make, revoke) and the owner's usage. Thin: parse, call a service or selector."""

from __future__ import annotations

from django.conf import settings
from django.utils.cache import add_never_cache_headers
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from core.errors import ServiceError

from . import selectors, tokens
from .models import ApiToken


class ErrorOutput(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()

    class Meta:
        ref_name = "AccountsError"


class TokenOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    prefix = serializers.CharField(help_text="The first characters of the key; the key itself is never shown again.")
    created_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField()
    last_used_at = serializers.DateTimeField(allow_null=True)
    revoked_at = serializers.DateTimeField(allow_null=True)


class NewTokenOutputSerializer(TokenOutputSerializer):
    key = serializers.CharField(help_text="The raw key, in this response only.")


class ApiTokensApi(APIView):
    throttle_scope = "token"  # creating tokens is limited per client IP (core/throttles.py)

    class InputSerializer(serializers.Serializer):
        name = serializers.CharField(max_length=100)
        expires_in_days = serializers.IntegerField(required=False, min_value=1)

    @extend_schema(responses=TokenOutputSerializer(many=True), operation_id="api_tokens_list")
    def get(self, request):
        return Response(TokenOutputSerializer(tokens.api_tokens_for_owner(user=request.user), many=True).data)

    @extend_schema(
        request=InputSerializer,
        responses={201: NewTokenOutputSerializer, 400: ErrorOutput, 403: ErrorOutput, 409: ErrorOutput},
        operation_id="api_tokens_create",
        description="Needs a signed-in session: a request authenticated by a token is refused (403 session_required).",
    )
    def post(self, request):
        # A token that could mint tokens would outlive its own revocation (its holder makes a fresh 365-day one
        # first): only a session, which a password change ends, creates credentials.
        if isinstance(request.auth, ApiToken):
            raise ServiceError(
                "session_required",
                "A token cannot create tokens: sign in and create it on the token page or with your session.",
                status=403,
            )
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        issued = tokens.api_token_create(
            user=request.user,
            name=data.validated_data["name"],
            expires_in_days=data.validated_data.get("expires_in_days", settings.API_TOKEN_DEFAULT_DAYS),
        )
        body = {**TokenOutputSerializer(issued.token).data, "key": issued.raw_key}
        response = Response(body, status=status.HTTP_201_CREATED)
        add_never_cache_headers(response)  # the one response that carries the raw key
        return response


class ApiTokenApi(APIView):
    @extend_schema(
        request=None, responses={200: TokenOutputSerializer, 404: ErrorOutput}, operation_id="api_tokens_revoke"
    )
    def delete(self, request, token_id: int):
        token = tokens.api_token_revoke(user=request.user, token_id=token_id)
        return Response(TokenOutputSerializer(token).data)


class UsageOutputSerializer(serializers.Serializer):
    period = serializers.CharField()
    since = serializers.DateTimeField()
    tokens = serializers.IntegerField()
    cost = serializers.DecimalField(max_digits=14, decimal_places=6)
    token_limit = serializers.IntegerField(allow_null=True)
    cost_limit = serializers.DecimalField(max_digits=14, decimal_places=6, allow_null=True)


class UsageApi(APIView):
    @extend_schema(responses=UsageOutputSerializer(many=True), operation_id="usage_summary")
    def get(self, request):
        summary = selectors.usage_summary(user=request.user)
        return Response(UsageOutputSerializer(summary["periods"], many=True).data)
