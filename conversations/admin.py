from django.contrib import admin

from .models import AgentConversation, ConversationMessage, FiringLease, UsageRecord


class _ReadOnly(admin.ModelAdmin):
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(AgentConversation)
class AgentConversationAdmin(_ReadOnly):
    list_display = ("workflow", "generation", "agent_node_id", "message_count", "size_bytes", "updated_at")
    list_filter = ("generation",)
    search_fields = ("agent_node_id", "workflow__name")
    list_select_related = ("workflow",)

    def has_delete_permission(self, request, obj=None):
        # Deleting goes through the store (clear_conversation) so listeners and events run; use the panel's Clear.
        return False


@admin.register(ConversationMessage)
class ConversationMessageAdmin(_ReadOnly):
    list_display = ("conversation", "position", "role", "size_bytes")
    list_select_related = ("conversation",)
    exclude = ("hash", "chain")

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(FiringLease)
class FiringLeaseAdmin(_ReadOnly):
    list_display = ("workflow", "generation", "agent_node_id", "owner_token", "acquired_at", "expires_at")


@admin.register(UsageRecord)
class UsageRecordAdmin(_ReadOnly):
    """The ledger is append-only: staff can read it, nobody can change or delete a row."""

    list_display = ("created_at", "kind", "provider", "model", "outcome", "input_tokens", "output_tokens", "cost")
    list_filter = ("kind", "outcome", "provider")
    search_fields = ("idempotency_key", "model", "agent_node_id")

    def has_delete_permission(self, request, obj=None):
        return False
