"""Staff see uploads' metadata (never the bytes); rows are made by uploads and removed by the sweep."""

from django.contrib import admin

from .models import StoredFile


@admin.register(StoredFile)
class StoredFileAdmin(admin.ModelAdmin):
    list_display = ("id", "name", "media_type", "size", "owner", "created_at")
    list_filter = ("media_type",)
    search_fields = ("name", "sha256", "owner__username")
    readonly_fields = ("owner", "name", "media_type", "size", "sha256", "created_at")

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
