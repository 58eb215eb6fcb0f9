"""Static files from the web process (daphne): collected, content-hashed files with a year-long cache, else the
source folders (a checkout that never ran collectstatic).

With `STATIC_HASHED` on, templates name files by their hashed names (ManifestStaticFilesStorage; Django uses the
hashed names only with DEBUG off); those are served from STATIC_ROOT with `Cache-Control: public, max-age=31536000,
immutable` (a new deploy is a new name). Anything else under /static/ (an unhashed name, DEBUG on, or hashing off)
is served with `no-cache`: the browser asks again each time and gets a 304 when nothing changed.

Django's static handler answers before any middleware runs, so SecurityMiddleware and the CSP middleware never
see these responses: the page security headers are added here too (a file we serve must not be framed, sniffed
into another type or run inline code either).
"""

from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from django.core.exceptions import SuspiciousFileOperation
from django.http import Http404
from django.views.static import serve as serve_file


def add_static_security_headers(request, response):
    response.headers.setdefault("Content-Security-Policy", settings.STATIC_CONTENT_SECURITY_POLICY)
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("X-Frame-Options", settings.X_FRAME_OPTIONS)
    response.headers.setdefault("Referrer-Policy", settings.SECURE_REFERRER_POLICY)
    response.headers.setdefault("Cross-Origin-Opener-Policy", settings.SECURE_CROSS_ORIGIN_OPENER_POLICY)
    response.headers.setdefault("Cross-Origin-Resource-Policy", "same-origin")
    if settings.SECURE_HSTS_SECONDS and request.is_secure():
        value = f"max-age={settings.SECURE_HSTS_SECONDS}"
        if settings.SECURE_HSTS_INCLUDE_SUBDOMAINS:
            value += "; includeSubDomains"
        if settings.SECURE_HSTS_PRELOAD:
            value += "; preload"
        response.headers.setdefault("Strict-Transport-Security", value)
    return response


class SecuredASGIStaticFilesHandler(ASGIStaticFilesHandler):
    async def get_response_async(self, request):
        return add_static_security_headers(request, await super().get_response_async(request))


# name.0123456789ab.ext: the 12 hex digits ManifestStaticFilesStorage puts before the extension.
HASHED_NAME = re.compile(r"\.[0-9a-f]{12}\.[A-Za-z0-9]+$")
LONG_CACHE = "public, max-age=31536000, immutable"
SHORT_CACHE = "no-cache"  # kept, but asked again each time (a 304 when unchanged): never a stale script


class StaticFiles(SecuredASGIStaticFilesHandler):
    """The page security headers (SecuredASGIStaticFilesHandler), plus hashed files from STATIC_ROOT and their cache
    headers."""

    def serve(self, request):
        relative = self.file_path(request.path)
        # `/static/..%2f...` arrives decoded as `../`: a name that climbs out of the static folders is no file we
        # serve. Said here as a 404 (the handler answers it with the headers above), not left to the finders'
        # SuspiciousFileOperation, which nothing on this path catches (a bare 500 without security headers).
        if ".." in Path(relative).parts:
            raise Http404(relative)
        try:
            return self._serve(request, relative)
        except SuspiciousFileOperation as error:
            raise Http404(relative) from error

    def _serve(self, request, relative: str):
        root = Path(settings.STATIC_ROOT)
        if settings.STATIC_HASHED and (root / relative).is_file():
            response = serve_file(request, relative, document_root=str(root))
            hashed = HASHED_NAME.search(relative) is not None
        else:
            response = super().serve(request)  # Http404 for a missing file, answered by the handler
            hashed = False
        response["Cache-Control"] = LONG_CACHE if hashed else SHORT_CACHE
        response["X-Content-Type-Options"] = "nosniff"
        return response
