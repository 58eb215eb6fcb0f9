"""REST for owners' provider keys. Write-only: no response ever carries a key, only its last four characters."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from . import secrets, selectors, services
from .models import OWNER_KEY_PROVIDERS

ERROR_RESPONSE = inline_serializer(
    "ProviderKeyError", fields={"code": serializers.CharField(), "message": serializers.CharField()}
)


class KeyOutputSerializer(serializers.Serializer):
    provider = serializers.ChoiceField(choices=OWNER_KEY_PROVIDERS)
    key_suffix = serializers.CharField(help_text="Last four characters (empty for short keys); the key is never shown.")
    base_url = serializers.CharField()
    last_tested_at = serializers.DateTimeField(allow_null=True)
    last_test_ok = serializers.BooleanField(allow_null=True)
    last_test_message = serializers.CharField()
    updated_at = serializers.DateTimeField()


class ProviderKeysApi(APIView):
    @extend_schema(
        operation_id="provider_keys_list",
        summary="The provider keys stored for you (never the keys themselves)",
        responses={200: KeyOutputSerializer(many=True)},
    )
    def get(self, request):
        rows = selectors.owner_provider_keys_list(owner=request.user)
        return Response(KeyOutputSerializer(rows, many=True).data)


class ProviderKeyApi(APIView):
    class InputSerializer(serializers.Serializer):
        # Up to 20 000 characters: a Vertex service account key (JSON) is ~2.5 kB; the service checks each kind.
        api_key = serializers.CharField(
            allow_blank=True,
            trim_whitespace=True,
            max_length=20_000,
            write_only=True,
            help_text="The key; for vertex_agent a service account key (JSON text) or an OAuth access token.",
        )
        base_url = serializers.CharField(allow_blank=True, required=False, max_length=500)

    @extend_schema(
        operation_id="provider_key_set",
        summary="Store (or replace) your key for a provider; used by your agents before the server's key",
        request=InputSerializer,
        responses={200: KeyOutputSerializer, 400: ERROR_RESPONSE},
    )
    def put(self, request, provider: str):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        row = services.owner_provider_key_set(
            owner=request.user,
            provider=provider,
            api_key=data.validated_data["api_key"],
            base_url=data.validated_data.get("base_url", ""),
        )
        return Response(KeyOutputSerializer(row).data)

    @extend_schema(operation_id="provider_key_delete", responses={204: None, 404: ERROR_RESPONSE})
    def delete(self, request, provider: str):
        services.owner_provider_key_delete(owner=request.user, provider=provider)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ProviderKeyTestApi(APIView):
    @extend_schema(
        operation_id="provider_key_test",
        summary="Try the stored key with one cheap call (the provider's model list)",
        request=None,
        responses={200: KeyOutputSerializer, 404: ERROR_RESPONSE},
    )
    def post(self, request, provider: str):
        row = services.owner_provider_key_test(owner=request.user, provider=provider)
        return Response(KeyOutputSerializer(row).data)


class SecretOutputSerializer(serializers.Serializer):
    name = serializers.CharField()
    value_suffix = serializers.CharField(help_text="Last four characters of a long value; the value is never shown.")
    updated_at = serializers.DateTimeField()


class SecretsApi(APIView):
    @extend_schema(
        operation_id="secrets_list",
        summary="The names of the secrets stored for you (never their values)",
        responses={200: SecretOutputSerializer(many=True)},
    )
    def get(self, request):
        return Response(SecretOutputSerializer(secrets.owner_secrets_list(owner=request.user), many=True).data)


class SecretApi(APIView):
    class InputSerializer(serializers.Serializer):
        value = serializers.CharField(trim_whitespace=True, max_length=8000, write_only=True)

    @extend_schema(
        operation_id="secret_set",
        summary="Store (or replace) a named secret, for an MCP server's headers; write-only",
        request=InputSerializer,
        responses={200: SecretOutputSerializer, 400: ERROR_RESPONSE},
    )
    def put(self, request, name: str):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        row = secrets.owner_secret_set(owner=request.user, name=name, value=data.validated_data["value"])
        return Response(SecretOutputSerializer(row).data)

    @extend_schema(operation_id="secret_delete", responses={204: None, 404: ERROR_RESPONSE})
    def delete(self, request, name: str):
        secrets.owner_secret_delete(owner=request.user, name=name)
        return Response(status=status.HTTP_204_NO_CONTENT)
