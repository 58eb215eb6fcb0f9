"""The token page (post/redirect/get; the new key shown once) and the usage page."""

from __future__ import annotations

import base64
import hashlib

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import PasswordChangeForm
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from core.errors import ServiceError
from core.throttles import ip_throttle

from . import selectors, tokens
from .passwords import owner_password_change

_NEW_KEY_SESSION = "accounts.new_token"


def _fernet() -> Fernet:
    # The new key crosses one redirect inside the session; the session row holds only this ciphertext, and
    # the GET that shows the key removes it.
    digest = hashlib.sha256(b"accounts.new-token:" + settings.SECRET_KEY.encode()).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


def _stash_new_key(request, issued: tokens.IssuedToken) -> None:
    request.session[_NEW_KEY_SESSION] = {
        "id": issued.token.pk,
        "key": _fernet().encrypt(issued.raw_key.encode()).decode(),
    }


def _pop_new_key(request) -> dict | None:
    stashed = request.session.pop(_NEW_KEY_SESSION, None)
    if not isinstance(stashed, dict):
        return None
    try:
        raw = _fernet().decrypt(stashed["key"].encode(), ttl=300).decode()
    except (InvalidToken, KeyError, AttributeError):
        return None
    return {"id": stashed.get("id"), "key": raw}


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def api_tokens_page(request):
    if request.method == "POST":
        action = request.POST.get("action", "")
        # Creating and replacing mint a key: the same per-address limit as POST /api/tokens/ (one counter).
        if action in ("create", "replace") and (refused := ip_throttle(request, "token")):
            return refused
        try:
            if action == "create":
                days = request.POST.get("expires_in_days") or settings.API_TOKEN_DEFAULT_DAYS
                issued = tokens.api_token_create(
                    user=request.user, name=request.POST.get("name", ""), expires_in_days=int(days)
                )
                _stash_new_key(request, issued)
            elif action in ("revoke", "replace"):
                token_id = int(request.POST.get("token_id", ""))
                if action == "revoke":
                    revoked = tokens.api_token_revoke(user=request.user, token_id=token_id)
                    messages.success(request, f"Token “{revoked.name}” was revoked.")
                else:
                    _stash_new_key(request, tokens.api_token_replace(user=request.user, token_id=token_id))
            else:
                messages.error(request, "Unknown action.")
        except ValueError:
            messages.error(request, "That form was not filled in correctly.")
        except ServiceError as error:
            messages.error(request, error.message)
        return redirect("api-token")
    new_key = _pop_new_key(request)
    return render(
        request,
        "accounts/api_tokens.html",
        {
            "tokens": tokens.api_tokens_for_owner(user=request.user),
            "new_key": new_key,
            "default_days": settings.API_TOKEN_DEFAULT_DAYS,
            "max_days": settings.API_TOKEN_MAX_DAYS,
            "expiry_choices": sorted({7, 30, settings.API_TOKEN_DEFAULT_DAYS, settings.API_TOKEN_MAX_DAYS}),
        },
    )


@login_required
@require_http_methods(["GET"])
def usage_page(request):
    return render(request, "accounts/usage.html", {"usage": selectors.usage_summary(user=request.user)})


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def password_change_page(request):
    """The owner's own password (the current one asked first); the other sessions and their sockets end."""
    form = PasswordChangeForm(request.user, request.POST or None)
    if request.method == "POST" and form.is_valid():
        owner_password_change(request=request, user=request.user, new_password=form.cleaned_data["new_password1"])
        messages.success(request, "Your password was changed. Your other sessions were signed out.")
        return redirect("password-change")
    return render(request, "accounts/password.html", {"form": form})
