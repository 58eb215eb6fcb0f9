"""Staff see token names and prefixes (never a key or its hash) and set spending limits."""

from __future__ import annotations

from django.contrib import admin, messages

from .models import ApiToken, SpendingLimit
from .tokens import api_token_revoke


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("name", "prefix", "user", "created_at", "expires_at", "last_used_at", "revoked_at")
    list_filter = ("revoked_at",)
    search_fields = ("name", "prefix", "user__username")
    fields = ("user", "name", "prefix", "created_at", "expires_at", "last_used_at", "revoked_at")
    readonly_fields = fields
    actions = ("revoke",)

    def has_add_permission(self, request):
        return False  # a key is shown to its owner once; staff never see one

    def has_change_permission(self, request, obj=None):
        return False

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request, queryset):
        live = list(queryset.filter(revoked_at__isnull=True).select_related("user"))
        for token in live:
            api_token_revoke(user=token.user, token_id=token.pk)
        messages.success(request, f"Revoked {len(live)} token(s).")


@admin.register(SpendingLimit)
class SpendingLimitAdmin(admin.ModelAdmin):
    list_display = ("__str__", "daily_tokens", "monthly_tokens", "daily_cost", "monthly_cost", "updated_at")
    list_select_related = ("user",)
    autocomplete_fields = ("user",)
    fields = ("user", "workflow_id", "daily_tokens", "monthly_tokens", "daily_cost", "monthly_cost")
