"""The provider keys settings page: store, replace, remove and test keys. Keys are never rendered back."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from core.errors import ServiceError

from . import selectors, services
from .models import OWNER_KEY_PROVIDERS

# The refusals that concern the base URL field (shown beside it); any other refusal of a save sits beside the key.
BASE_URL_CODES = frozenset({"invalid_base_url", "unsafe_base_url"})


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def provider_keys_page(request):
    if request.method == "POST":
        provider = request.POST.get("provider", "")
        action = request.POST.get("action", "save")
        try:
            if action == "delete":
                services.owner_provider_key_delete(owner=request.user, provider=provider)
                messages.success(request, "Key removed: your agents use the server's key for it again.")
            elif action == "test":
                row = services.owner_provider_key_test(owner=request.user, provider=provider)
                (messages.success if row.last_test_ok else messages.error)(request, row.last_test_message)
            else:
                services.owner_provider_key_set(
                    owner=request.user,
                    provider=provider,
                    api_key=request.POST.get("api_key", ""),
                    base_url=request.POST.get("base_url", ""),
                )
                messages.success(request, "Key saved. It is stored encrypted and will not be shown again.")
        except ServiceError as exc:
            if action == "save":
                # Shown again with what was typed (the base URL; a key is never written back into a page) and the
                # reason beside the field it concerns.
                refused = {
                    "provider": provider,
                    "base_url": request.POST.get("base_url", ""),
                    "field": "base_url" if exc.code in BASE_URL_CODES else "api_key",
                    "message": exc.message,
                }
                return _render(request, refused=refused, status=400)
            messages.error(request, exc.message)
        return redirect("provider-keys-page")
    return _render(request)


def _render(request, *, refused: dict | None = None, status: int = 200):
    stored = {row.provider: row for row in selectors.owner_provider_keys_list(owner=request.user)}
    rows = [
        {
            "provider": value,
            "label": label,
            "stored": stored.get(value),
            "server_key": selectors.server_key_configured(provider=value),
            "refused": refused if refused and refused["provider"] == value else None,
        }
        for value, label in OWNER_KEY_PROVIDERS
    ]
    return render(request, "provider_keys.html", {"rows": rows}, status=status)
