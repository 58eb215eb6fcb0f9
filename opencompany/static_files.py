"""Static files with the same security headers as pages.

Django's static handler answers before any middleware runs, so SecurityMiddleware and the CSP middleware never
see these responses. A file we serve must not be framed, sniffed into another type or run inline code either.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler


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
