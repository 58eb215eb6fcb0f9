"""Staff can look at chats (read-only): the thread's shape, runs and their outcomes. Message text stays out of
list pages; changes go through the chat services (the page or REST), never through admin forms."""

from django.contrib import admin

from .models import ChatMessage, ChatRun, ChatSession


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(ChatSession)
class ChatSessionAdmin(ReadOnlyAdmin):
    list_display = ("id", "workflow", "revision", "active_leaf_id", "updated_at")
    search_fields = ("workflow__name",)


@admin.register(ChatRun)
class ChatRunAdmin(ReadOnlyAdmin):
    list_display = ("id", "session", "kind", "state", "outcome", "error_code", "generation", "created_at")
    list_filter = ("state", "kind", "error_code")
    readonly_fields = [f.name for f in ChatRun._meta.fields]


@admin.register(ChatMessage)
class ChatMessageAdmin(ReadOnlyAdmin):
    list_display = ("id", "session", "role", "kind", "status", "generation", "created_at")
    list_filter = ("role", "status")
