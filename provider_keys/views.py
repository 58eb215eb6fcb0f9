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
            messages.error(request, exc.message)
        return redirect("provider-keys-page")
    stored = {row.provider: row for row in selectors.owner_provider_keys_list(owner=request.user)}
    rows = [{"provider": value, "label": label, "stored": stored.get(value)} for value, label in OWNER_KEY_PROVIDERS]
    return render(request, "provider_keys.html", {"rows": rows})
