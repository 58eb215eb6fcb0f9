from django.contrib import admin

from .models import AllowedProviderHost, OwnerProviderKey


@admin.register(AllowedProviderHost)
class AllowedProviderHostAdmin(admin.ModelAdmin):
    list_display = ("host", "note", "created_at")
    search_fields = ("host",)


@admin.register(OwnerProviderKey)
class OwnerProviderKeyAdmin(admin.ModelAdmin):
    """Metadata only: staff see which owners brought keys, never a key (not even encrypted)."""

    list_display = ("owner", "provider", "key_suffix", "base_url", "last_test_ok", "updated_at")
    list_filter = ("provider",)
    fields = ("owner", "provider", "key_suffix", "base_url", "last_tested_at", "last_test_ok", "last_test_message")
    readonly_fields = fields

    def has_add_permission(self, request):
        return False  # keys are written by their owner only

    def has_change_permission(self, request, obj=None):
        return False
