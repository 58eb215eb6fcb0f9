"""REST for the owner's Memory panel and API clients. Thin: parse, call a service or selector, render."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from core.schema import ID_MAX, VERSION_MAX, int_query_parameter

from . import selectors, services
from .access import access_memory_namespace
from .errors import invalid, item_not_found
from .history import memory_history, memory_item_restore
from .provenance import Provenance


class ItemOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    title = serializers.CharField()
    content = serializers.CharField()
    category = serializers.CharField()
    tags = serializers.ListField(child=serializers.CharField())
    version = serializers.IntegerField()
    expires_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    indexing_state = serializers.ChoiceField(choices=["fts_only", "not_indexed", "pending", "ready", "failed"])
    score = serializers.FloatField(required=False, help_text="Only in search results.")


ERROR_RESPONSE = inline_serializer(
    "MemoryError",
    fields={
        "code": serializers.CharField(),
        "message": serializers.CharField(),
        "hint": serializers.CharField(required=False),
    },
)
CONFLICT_RESPONSE = inline_serializer(
    "MemoryVersionConflict",
    fields={
        "code": serializers.CharField(),
        "message": serializers.CharField(),
        "current_version": serializers.IntegerField(),
        "current": ItemOutputSerializer(),
    },
)


def _actor(request) -> str:
    return f"owner:{request.user.pk}"


class MemoryItemsApi(APIView):
    class InputSerializer(serializers.Serializer):
        content = serializers.CharField(trim_whitespace=False)
        title = serializers.CharField(required=False, allow_blank=True)
        category = serializers.CharField(required=False, allow_blank=True)
        tags = serializers.ListField(child=serializers.CharField(), required=False)
        expires_at = serializers.DateTimeField(required=False, allow_null=True)

    class PageOutputSerializer(serializers.Serializer):
        items = ItemOutputSerializer(many=True)
        next_cursor = serializers.CharField(allow_null=True)
        search = serializers.ChoiceField(choices=["fts", "hybrid"], required=False)

    @extend_schema(
        operation_id="memory_items_list",
        summary="List or search a memory node's items",
        parameters=[
            OpenApiParameter("q", OpenApiTypes.STR, description="Search text (full-text, hybrid with vectors)."),
            OpenApiParameter("category", OpenApiTypes.STR, many=True),
            OpenApiParameter("tag", OpenApiTypes.STR, many=True),
            OpenApiParameter("cursor", OpenApiTypes.STR, description="next_cursor of the previous page."),
            int_query_parameter(
                "limit", minimum=1, maximum=settings.MEMORY_LIMIT_MAX, description="At most this many items."
            ),
        ],
        responses={200: PageOutputSerializer, 400: ERROR_RESPONSE, 404: ERROR_RESPONSE},
    )
    def get(self, request, workflow_id: int, node_id: str):
        _, namespace = access_memory_namespace(
            user=request.user, workflow_id=workflow_id, node_id=node_id, create=False
        )
        if namespace is None:  # nothing stored yet, and a GET creates nothing
            return Response(self.PageOutputSerializer({"items": [], "next_cursor": None}).data)
        filters = {
            "categories": request.query_params.getlist("category") or None,
            "tags": request.query_params.getlist("tag") or None,
            "limit": request.query_params.get("limit") or None,
            "cursor": request.query_params.get("cursor") or None,
        }
        query = request.query_params.get("q", "").strip()
        if query:
            page = selectors.memory_items_recall(namespace=namespace, query=query, **filters)
        else:
            page = selectors.memory_items_list(namespace=namespace, **filters)
        return Response(self.PageOutputSerializer(page).data)

    @extend_schema(
        operation_id="memory_items_create",
        summary="Remember a new item",
        request=InputSerializer,
        parameters=[OpenApiParameter("Idempotency-Key", OpenApiTypes.STR, OpenApiParameter.HEADER)],
        responses={201: ItemOutputSerializer, 400: ERROR_RESPONSE, 404: ERROR_RESPONSE},
    )
    def post(self, request, workflow_id: int, node_id: str):
        _, namespace = access_memory_namespace(user=request.user, workflow_id=workflow_id, node_id=node_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        result = services.memory_item_remember(
            namespace=namespace,
            actor=_actor(request),
            provenance=Provenance("api"),
            idempotency_key=request.headers.get("Idempotency-Key"),
            announce_to_chat=True,
            **data.validated_data,
        )
        return Response(ItemOutputSerializer(result["item"]).data, status=status.HTTP_201_CREATED)


def _expected_version(request):
    value = request.data.get("expected_version") if hasattr(request.data, "get") else None
    if value is None:
        value = request.query_params.get("expected_version")
    if value is None:
        raise invalid("expected_version is required.", "Send the version you last read.")
    return value


class MemoryItemApi(APIView):
    class PatchInputSerializer(serializers.Serializer):
        expected_version = serializers.IntegerField(min_value=1, max_value=VERSION_MAX)
        content = serializers.CharField(required=False, trim_whitespace=False)
        title = serializers.CharField(required=False, allow_blank=True)
        category = serializers.CharField(required=False, allow_blank=True)
        tags = serializers.ListField(child=serializers.CharField(), required=False)
        expires_at = serializers.DateTimeField(required=False, allow_null=True)

    @extend_schema(
        operation_id="memory_item_get",
        summary="Read one item",
        responses={200: ItemOutputSerializer, 404: ERROR_RESPONSE},
    )
    def get(self, request, workflow_id: int, node_id: str, item_id: int):
        _, namespace = access_memory_namespace(
            user=request.user, workflow_id=workflow_id, node_id=node_id, create=False
        )
        if namespace is None:
            raise item_not_found()
        return Response(
            ItemOutputSerializer(selectors.memory_item_get(namespace=namespace, item_id=item_id)["item"]).data
        )

    @extend_schema(
        operation_id="memory_item_update",
        summary="Change an item (requires expected_version)",
        request=PatchInputSerializer,
        responses={200: ItemOutputSerializer, 400: ERROR_RESPONSE, 404: ERROR_RESPONSE, 409: CONFLICT_RESPONSE},
    )
    def patch(self, request, workflow_id: int, node_id: str, item_id: int):
        _, namespace = access_memory_namespace(user=request.user, workflow_id=workflow_id, node_id=node_id)
        data = self.PatchInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        patch = dict(data.validated_data)
        expected_version = patch.pop("expected_version")
        result = services.memory_item_update(
            namespace=namespace,
            item_id=item_id,
            expected_version=expected_version,
            patch=patch,
            actor=_actor(request),
            provenance=Provenance("api"),
            idempotency_key=request.headers.get("Idempotency-Key"),
            announce_to_chat=True,
        )
        return Response(ItemOutputSerializer(result["item"]).data)

    @extend_schema(
        operation_id="memory_item_forget",
        summary="Forget an item (requires expected_version, in the body or the query string)",
        parameters=[int_query_parameter("expected_version", minimum=1, maximum=VERSION_MAX, required=True)],
        request=None,
        responses={204: None, 400: ERROR_RESPONSE, 404: ERROR_RESPONSE, 409: CONFLICT_RESPONSE},
    )
    def delete(self, request, workflow_id: int, node_id: str, item_id: int):
        _, namespace = access_memory_namespace(user=request.user, workflow_id=workflow_id, node_id=node_id)
        services.memory_item_forget(
            namespace=namespace,
            item_id=item_id,
            expected_version=_expected_version(request),
            actor=_actor(request),
            provenance=Provenance("api"),
            idempotency_key=request.headers.get("Idempotency-Key"),
            announce_to_chat=True,
        )
        return Response(status=status.HTTP_204_NO_CONTENT)


class MemoryClearApi(APIView):
    @extend_schema(
        operation_id="memory_clear",
        summary="Clear Memory: remove every item of this memory node",
        request=None,
        responses={
            200: inline_serializer("MemoryCleared", fields={"cleared": serializers.IntegerField()}),
            404: ERROR_RESPONSE,
        },
    )
    def post(self, request, workflow_id: int, node_id: str):
        _, namespace = access_memory_namespace(user=request.user, workflow_id=workflow_id, node_id=node_id)
        cleared = services.memory_namespace_items_clear(
            namespace=namespace, actor=_actor(request), announce_to_chat=True
        )
        return Response({"cleared": cleared})


class MemoryHistoryApi(APIView):
    class FilterSerializer(serializers.Serializer):
        item = serializers.IntegerField(required=False, min_value=1, max_value=ID_MAX)
        chat_run = serializers.IntegerField(required=False, min_value=1, max_value=ID_MAX)
        agent = serializers.CharField(required=False, max_length=200)
        limit = serializers.IntegerField(required=False, min_value=1, max_value=500, default=100)

    @extend_schema(
        operation_id="memory_history",
        summary="Versions of this memory's items with their provenance (who wrote each, from which answer)",
        parameters=[
            int_query_parameter("item", minimum=1, maximum=ID_MAX, description="Only this item's versions."),
            int_query_parameter(
                "chat_run", minimum=1, maximum=ID_MAX, description="Only what the agents of this chat run wrote."
            ),
            OpenApiParameter("agent", str, description="Only what this agent node wrote."),
            int_query_parameter(
                "limit", minimum=1, maximum=500, description="At most this many versions (default 100, at most 500)."
            ),
        ],
        responses={
            200: inline_serializer(
                "MemoryHistory", fields={"versions": serializers.ListField(child=serializers.DictField())}
            ),
            400: ERROR_RESPONSE,
            404: ERROR_RESPONSE,
        },
    )
    def get(self, request, workflow_id: int, node_id: str):
        _, namespace = access_memory_namespace(
            user=request.user, workflow_id=workflow_id, node_id=node_id, create=False
        )
        filters = self.FilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        data = filters.validated_data
        if namespace is None:  # nothing stored yet, and a GET creates nothing
            return Response({"versions": []})
        versions = memory_history(
            namespace=namespace,
            item_id=data.get("item"),
            chat_run_id=data.get("chat_run"),
            agent_node_id=data.get("agent"),
            limit=data["limit"],
        )
        return Response({"versions": versions})


class MemoryItemRestoreApi(APIView):
    class InputSerializer(serializers.Serializer):
        version = serializers.IntegerField(min_value=1, max_value=VERSION_MAX)
        expected_version = serializers.IntegerField(min_value=1, max_value=VERSION_MAX)

    @extend_schema(
        operation_id="memory_item_restore",
        summary="Restore an earlier version of an item (written as a new version)",
        request=InputSerializer,
        responses={
            200: inline_serializer("MemoryRestored", fields={"item": ItemOutputSerializer()}),
            400: ERROR_RESPONSE,
            404: ERROR_RESPONSE,
            409: CONFLICT_RESPONSE,
        },  # fmt: skip
    )
    def post(self, request, workflow_id: int, node_id: str, item_id: int):
        _, namespace = access_memory_namespace(user=request.user, workflow_id=workflow_id, node_id=node_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        result = memory_item_restore(
            namespace=namespace,
            item_id=item_id,
            actor=_actor(request),
            provenance=Provenance("api"),
            **data.validated_data,
        )
        return Response(result)
