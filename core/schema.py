"""OpenAPI component names that stay unique with the nested Input/Output serializer style.

Every thin API nests its own `InputSerializer` / `OutputSerializer`; by default they would
all be called "Input"/"Output" in the schema and overwrite each other. A nested serializer
is named after the view that holds it instead: `ChatMessageSendApi.InputSerializer` ->
`ChatMessageSendInput`.
"""

from drf_spectacular.openapi import AutoSchema as SpectacularAutoSchema
from rest_framework import serializers


class AutoSchema(SpectacularAutoSchema):
    def get_serializer_name(self, serializer, direction):
        cls = serializer if isinstance(serializer, type) else type(serializer)
        parts = cls.__qualname__.split(".")
        if len(parts) >= 2 and "<locals>" not in parts:
            outer = parts[-2]
            for suffix in ("Api", "View", "ViewSet"):
                if outer.endswith(suffix):
                    outer = outer[: -len(suffix)]
                    break
            return outer + parts[-1]
        return super().get_serializer_name(serializer, direction)

    def _get_request_for_media_type(self, serializer, direction="request"):
        """No PATCH here validates partially (each checks its input whole: `expected_version` is required), so the
        schema keeps the serializer's required fields instead of spectacular's all-optional "Patched" copy."""
        if self.method != "PATCH":
            return super()._get_request_for_media_type(serializer, direction)
        self.method = "PUT"
        try:
            return super()._get_request_for_media_type(serializer, direction)
        finally:
            self.method = "PATCH"

    def get_operation_id(self):
        """`<view>_<method>` (e.g. `conversation_list_get`): unique as long as view class names are, which
        path-derived ids are not (`/conversations/` and `/conversations/{id}/` both read as "retrieve")."""
        if getattr(self.view, "action", None) is not None:  # viewsets keep spectacular's naming
            return super().get_operation_id()
        name = type(self.view).__name__
        for suffix in ("Api", "View"):
            if name.endswith(suffix):
                name = name[: -len(suffix)]
                break
        snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")
        return f"{snake}_{self.method.lower()}"


class ErrorResponse(serializers.Serializer):
    """The body of every API error: a stable `code`, a human `message`, and for validation errors the fields."""

    code = serializers.CharField()
    message = serializers.CharField()
    errors = serializers.JSONField(required=False, help_text="Field errors of an `invalid_request`.")


class _JsonErrors:
    """The schema and docs views render their answers as YAML or HTML; a refusal (401 for anonymous callers) is
    rendered in the API's one error shape, as JSON, like every other API error."""

    def finalize_response(self, request, response, *args, **kwargs):
        from rest_framework.renderers import JSONRenderer

        if response.status_code >= 400 and isinstance(getattr(response, "data", None), dict):
            request.accepted_renderer = JSONRenderer()
            request.accepted_media_type = "application/json"
        return super().finalize_response(request, response, *args, **kwargs)


def schema_view():
    from drf_spectacular.views import SpectacularAPIView

    return type("SchemaView", (_JsonErrors, SpectacularAPIView), {}).as_view()


def docs_view(url_name: str):
    from drf_spectacular.views import SpectacularSwaggerSplitView

    return type("DocsView", (_JsonErrors, SpectacularSwaggerSplitView), {}).as_view(url_name=url_name)


def int_query_parameter(name: str, *, minimum: int, maximum: int, description: str = "", required: bool = False):
    """An integer query parameter whose published bounds are the ones its handler checks, so a client (or a schema
    fuzzer) reading the schema never sends a value the API then refuses (`limit=0`, `expected_version=0`)."""
    from drf_spectacular.utils import OpenApiParameter

    return OpenApiParameter(
        name,
        {"type": "integer", "minimum": minimum, "maximum": maximum},
        required=required,
        description=description,
    )


# The largest version number memory accepts (memory.validation.clean_version): a PostgreSQL integer.
VERSION_MAX = 2**31 - 1
# The largest row id (a PostgreSQL bigint).
ID_MAX = 2**63 - 1
