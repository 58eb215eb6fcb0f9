"""Errors the caller can act on: a stable `code`, a human message, never a bare 500."""

import logging

from django.core.exceptions import PermissionDenied
from django.http import Http404
from rest_framework import exceptions as drf_exceptions
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

logger = logging.getLogger(__name__)


class ServiceError(Exception):
    status = 400
    default_code = "invalid_request"

    def __init__(
        self,
        code: str | None = None,
        message: str = "",
        *,
        status: int | None = None,
        extra: dict | None = None,
        headers: dict | None = None,
    ):
        self.code = code or self.default_code
        self.headers = headers or {}  # e.g. Retry-After for an answer that says "try again"
        self.message = message or self.code.replace("_", " ")
        if status is not None:
            self.status = status
        self.extra = extra or {}
        super().__init__(f"{self.code}: {self.message}")

    def as_dict(self) -> dict:
        return {"code": self.code, "message": self.message, **self.extra}


class NotFoundError(ServiceError):
    status = 404
    default_code = "not_found"


class ConflictError(ServiceError):
    status = 409
    default_code = "conflict"


_DRF_CODES = {
    drf_exceptions.NotAuthenticated: "not_authenticated",
    drf_exceptions.AuthenticationFailed: "authentication_failed",
    drf_exceptions.NotFound: "not_found",
    drf_exceptions.MethodNotAllowed: "method_not_allowed",
    drf_exceptions.ParseError: "invalid_json",
    drf_exceptions.UnsupportedMediaType: "unsupported_media_type",
    drf_exceptions.Throttled: "rate_limited",
    drf_exceptions.PermissionDenied: "permission_denied",
}


def api_exception_handler(exc, context):
    """Render every API error as `{"code", "message", ...}` so clients branch on codes, not prose."""
    if isinstance(exc, ServiceError):
        return Response(exc.as_dict(), status=exc.status, headers=exc.headers)
    if isinstance(exc, Http404):
        return Response({"code": "not_found", "message": "Not found."}, status=404)
    if isinstance(exc, PermissionDenied):
        exc = drf_exceptions.PermissionDenied()
    if isinstance(exc, drf_exceptions.ValidationError):
        return Response(
            {"code": "invalid_request", "message": "The request is not valid.", "errors": exc.detail},
            status=400,
        )
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    code = next((c for cls, c in _DRF_CODES.items() if isinstance(exc, cls)), "error")
    detail = response.data.get("detail") if isinstance(response.data, dict) else None
    response.data = {"code": code, "message": str(detail or code)}
    return response
