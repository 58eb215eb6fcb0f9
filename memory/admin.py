"""Staff tools: search, edit with the version check, history, bulk forget, clear. Writes go through services."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.contrib.postgres.forms import SimpleArrayField

from opencompany.errors import ServiceError

from . import services
from .models import MemoryItem, MemoryItemHistory, MemoryNamespace
from .provenance import Provenance


def _staff(request) -> str:
    return f"staff:{request.user.pk}"


class MemoryItemHistoryInline(admin.TabularInline):
    model = MemoryItemHistory
    fk_name = "item"
    extra = 0
    can_delete = False
    # Provenance read-only beside the change: who wrote the version and, for an agent's write, the turn it came from.
    fields = (
        "created_at",
        "operation",
        "version",
        "actor",
        "source",
        "agent_node_id",
        "chat_run_id",
        "firing_id",
        "generation",
        "detail",
        "before",
        "after",
    )
    readonly_fields = fields
    ordering = ("-id",)

    def has_add_permission(self, request, obj=None):
        return False


class MemoryItemAdminForm(forms.ModelForm):
    expected_version = forms.IntegerField(widget=forms.HiddenInput)
    tags = SimpleArrayField(forms.CharField(max_length=50), required=False, delimiter=",")

    class Meta:
        model = MemoryItem
        fields = ("title", "content", "category", "tags", "expires_at")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["expected_version"].initial = self.instance.version

    def clean(self):
        cleaned = super().clean()
        expected = cleaned.get("expected_version")
        current = MemoryItem.objects.filter(pk=self.instance.pk).values_list("version", flat=True).first()
        if current is not None and expected is not None and expected != current:
            raise forms.ValidationError(
                f"Someone changed this memory meanwhile (now version {current}). Reload the page and edit again."
            )
        return cleaned


@admin.register(MemoryItem)
class MemoryItemAdmin(admin.ModelAdmin):
    form = MemoryItemAdminForm
    list_display = ("id", "title", "category", "namespace", "owner", "version", "expires_at", "updated_at")
    list_filter = ("category",)
    search_fields = (
        "title",
        "content",
        "namespace__node_id",
        "namespace__workflow__name",
        "namespace__owner__username",
        "namespace__owner__email",
    )
    readonly_fields = ("namespace", "version", "created_at", "updated_at")
    inlines = [MemoryItemHistoryInline]
    actions = ["forget_selected"]
    list_select_related = ("namespace", "namespace__owner")

    @admin.display(description="owner")
    def owner(self, obj):
        return obj.namespace.owner

    def has_add_permission(self, request):
        # Items come from the agents and the owner's panel; staff edit and forget.
        return False

    def get_actions(self, request):
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions

    def save_model(self, request, obj, form, change):
        patch = {
            field: form.cleaned_data[field] for field in form.changed_data if field in MemoryItemAdminForm.Meta.fields
        }
        if not patch:
            return
        try:
            services.memory_item_update(
                namespace=obj.namespace,
                item_id=obj.pk,
                expected_version=form.cleaned_data["expected_version"],
                patch=patch,
                actor=_staff(request),
                provenance=Provenance("staff"),
            )
        except ServiceError as exc:
            # The race after clean(): the service's locked compare refused it, nothing was written.
            self.message_user(request, f"Not saved: {exc.message}", level=messages.ERROR)

    def delete_model(self, request, obj):
        services.memory_item_forget(
            namespace=obj.namespace, item_id=obj.pk, expected_version=obj.version, actor=_staff(request)
        )

    @admin.action(description="Forget selected memory items")
    def forget_selected(self, request, queryset):
        forgotten = 0
        for item in queryset.select_related("namespace"):
            try:
                services.memory_item_forget(
                    namespace=item.namespace, item_id=item.pk, expected_version=item.version, actor=_staff(request)
                )
                forgotten += 1
            except ServiceError as exc:
                self.message_user(request, f"#{item.pk}: {exc.message}", level=messages.WARNING)
        self.message_user(request, f"Forgot {forgotten} item(s).")


@admin.register(MemoryNamespace)
class MemoryNamespaceAdmin(admin.ModelAdmin):
    list_display = ("id", "workflow", "node_id", "owner", "item_count", "created_at")
    search_fields = ("node_id", "workflow__name", "owner__username")
    readonly_fields = ("owner", "workflow", "node_id", "item_count", "created_at")
    actions = ["clear_selected"]

    def has_add_permission(self, request):
        return False

    @admin.action(description="Clear Memory (remove all items) of the selected namespaces")
    def clear_selected(self, request, queryset):
        removed = sum(
            services.memory_namespace_items_clear(namespace=namespace, actor=_staff(request)) for namespace in queryset
        )
        self.message_user(request, f"Removed {removed} item(s).")


@admin.register(MemoryItemHistory)
class MemoryItemHistoryAdmin(admin.ModelAdmin):
    """Every version with where it came from, read-only: a forgotten item's trace (its forget row) lives only here."""

    list_display = (
        "id",
        "created_at",
        "namespace",
        "item_id",
        "operation",
        "version",
        "source",
        "actor",
        "agent_node_id",
        "chat_run_id",
        "firing_id",
    )
    list_filter = ("source", "operation")
    search_fields = ("=item_id", "=chat_run_id", "agent_node_id", "actor")
    list_select_related = ("namespace",)
    readonly_fields = [field.name for field in MemoryItemHistory._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
