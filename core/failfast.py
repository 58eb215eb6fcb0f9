"""Fail fast, in JSON: every error under /api/ in the one error shape, and a dependency outage as a quick 503.

While PostgreSQL or Redis is down a request would otherwise wait out a pool or socket timeout and then show
Django's HTML 500 page. The connect and statement timeouts of web processes are short (settings: DB_WEB_*), so the
failing call raises within about two seconds; this middleware turns that exception into `503 {"code":
"unavailable"}` with `Retry-After` under /api/ and a plain "temporarily unavailable" page elsewhere.
"""

from __future__ import annotations

import logging
import sys

from django.conf import settings
from django.core.signals import got_request_exception
from django.db import InterfaceError as DjangoInterfaceError
from django.db import OperationalError as DjangoOperationalError
from django.http import HttpResponse, JsonResponse
from django.template.loader import render_to_string

logger = logging.getLogger(__name__)

_STATUS_CODES = {
    400: "invalid_request",
    401: "not_authenticated",
    403: "permission_denied",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    413: "request_too_large",
    415: "unsupported_media_type",
    429: "rate_limited",
    500: "server_error",
    503: "unavailable",
}
_MESSAGES = {
    404: "Not found.",
    405: "Method not allowed.",
    500: "The server failed to answer this request.",
}


def _unavailable_types() -> tuple[type[BaseException], ...]:
    import psycopg
    import redis.exceptions
    from kombu.exceptions import OperationalError as KombuOperationalError

    return (
        DjangoOperationalError,
        DjangoInterfaceError,
        psycopg.OperationalError,  # psycopg_pool.PoolTimeout is one
        redis.exceptions.ConnectionError,
        redis.exceptions.TimeoutError,
        KombuOperationalError,  # the broker (Redis) refused an enqueue
    )


def is_dependency_outage(exc: BaseException | None) -> bool:
    seen = 0
    while exc is not None and seen < 5:  # Django wraps psycopg errors; look one or two causes down
        if isinstance(exc, _unavailable_types()):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def is_api_request(request) -> bool:
    return request.path.startswith("/api/")


def unavailable_response(request) -> HttpResponse:
    retry_after = str(settings.UNAVAILABLE_RETRY_AFTER_SECONDS)
    if is_api_request(request):
        response = JsonResponse(
            {"code": "unavailable", "message": "A service this request needs is down; try again shortly."},
            status=503,
        )
    else:
        # Rendered without the request: context processors would query the database that is down.
        response = HttpResponse(render_to_string("unavailable.html"), status=503)
    response["Retry-After"] = retry_after
    response["Cache-Control"] = "no-store"
    return response


def _remember_exception(sender, request=None, **kwargs):
    # Django turns an exception raised in a middleware (a session save while PostgreSQL is down) into a 500
    # response before ApiErrorMiddleware sees it; this is where its type is still known.
    if request is not None:
        request._uncaught_exception = sys.exc_info()[1]


got_request_exception.connect(_remember_exception, dispatch_uid="core.failfast.remember_exception")


def _is_json(response) -> bool:
    content_type = response.get("Content-Type", "")
    return content_type.startswith("application/json") or "+json" in content_type.split(";")[0]


class FailFastMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if response.status_code >= 500 and is_dependency_outage(getattr(request, "_uncaught_exception", None)):
            return unavailable_response(request)
        if is_api_request(request) and response.status_code >= 400 and not _is_json(response):
            status = response.status_code
            body = {
                "code": _STATUS_CODES.get(status, "error"),
                "message": _MESSAGES.get(status, response.reason_phrase),
            }
            replacement = JsonResponse(body, status=status)
            for header in ("Allow", "Retry-After", "WWW-Authenticate"):
                if header in response:
                    replacement[header] = response[header]
            return replacement
        return response

    def process_exception(self, request, exception):
        if is_dependency_outage(exception):
            logger.warning("dependency outage path=%s error=%s", request.path, type(exception).__name__)
            return unavailable_response(request)
        if is_api_request(request):
            logger.exception("unhandled API error path=%s", request.path)
            return JsonResponse({"code": "server_error", "message": _MESSAGES[500]}, status=500)
        return None
