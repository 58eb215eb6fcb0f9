"""Refuse oversized requests before anything reads them."""

from django.http import JsonResponse

from core.body_limit import request_max_bytes
from core.text import UnstorableText, find_unstorable


class RequestSizeLimitMiddleware:
    """A body larger than REQUEST_MAX_BYTES answers 413 with a code, for pages and the API alike.

    Django's own DATA_UPLOAD_MAX_MEMORY_SIZE only trips when form data is parsed, and then as
    a 400 without a code; checking the declared length first costs nothing and reads nothing.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        declared = request.META.get("CONTENT_LENGTH") or "0"
        try:
            length = int(declared)
        except ValueError:
            return JsonResponse({"code": "invalid_request", "message": "Content-Length is not a number."}, status=400)
        limit = request_max_bytes(request.path_info)
        if length > limit:
            return JsonResponse(
                {
                    "code": "request_too_large",
                    "message": f"The request body is larger than {limit} bytes.",
                },
                status=413,
            )
        return self.get_response(request)


class UnstorableTextMiddleware:
    """URL segments, query parameters and posted form fields with NUL or an unpaired surrogate answer a JSON 400
    (`invalid_text`) before any view runs; JSON bodies get the same check in the API's parser."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        where = find_unstorable(request.path_info, path="URL path")
        if where is None:
            where = find_unstorable(dict(request.GET.lists()), path="query")
        # Forms are posted to pages only: the API parses JSON alone (its parser runs the same check), and a form
        # body sent to it is refused there as an unsupported type, unread.
        if where is None and request.method == "POST" and _is_form(request) and not _is_api(request):
            where = find_unstorable(dict(request.POST.lists()), path="form")
        if where is not None:
            error = UnstorableText(
                message=f"{where} contains a NUL character or an unpaired surrogate, which cannot be stored.",
                extra={"field": where},
            )
            return JsonResponse(error.as_dict(), status=error.status)
        return self.get_response(request)


def _is_form(request) -> bool:
    content_type = request.META.get("CONTENT_TYPE", "")
    return content_type.startswith(("application/x-www-form-urlencoded", "multipart/form-data"))


def _is_api(request) -> bool:
    return request.path_info.startswith("/api/")
