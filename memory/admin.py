"""Staff tools: search, edit with the version check, history, bulk forget, clear. Writes go through services."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.contrib.postgres.forms import SimpleArrayField
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.dateparse import parse_datetime
from django.views.decorators.http import require_POST

from core.errors import ConflictError, ServiceError

from . import services
from .diff import word_diff
from .history import memory_history, memory_item_restore
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

    def get_urls(self):
        restore = self.admin_site.admin_view(require_POST(self.restore_version_view))
        return [
            path("<int:item_id>/restore/", restore, name="memory_memoryitem_restore"),
            *super().get_urls(),
        ]

    def _item_and_namespace(self, object_id) -> tuple[MemoryItem | None, MemoryNamespace]:
        """The item (None once forgotten) and its namespace, which its history still names after a forget."""
        try:
            item_id = int(object_id)
        except (TypeError, ValueError):
            raise Http404("No such memory item.") from None
        item = MemoryItem.objects.select_related("namespace", "namespace__owner").filter(pk=item_id).first()
        if item is not None:
            return item, item.namespace
        row = MemoryItemHistory.objects.select_related("namespace").filter(item_id=item_id).order_by("-id").first()
        if row is None:
            raise Http404("No such memory item.")
        return None, row.namespace

    def history_view(self, request, object_id, extra_context=None):
        """The admin's History: every version of the item beside the one before it, the change marked word by word
        (the Memory panel's diff), its provenance read-only, and "Restore this version" for staff who may change."""
        item, namespace = self._item_and_namespace(object_id)
        if not self.has_view_or_change_permission(request, item):
            raise PermissionDenied
        item_id = int(object_id)
        can_restore = item is not None and self.has_change_permission(request, item)
        rows = []
        for version in memory_history(namespace=namespace, item_id=item_id, limit=500):
            before, after = version.get("before") or {}, version.get("after") or {}
            content_before, content_after = word_diff(before.get("content") or "", after.get("content") or "")
            title_before, title_after = word_diff(before.get("title") or "", after.get("title") or "")
            rows.append(
                {
                    **version,
                    "when": parse_datetime(version["created_at"]),
                    "is_update": version["operation"] == "update" and bool(before),
                    "content_before": content_before,
                    "content_after": content_after,
                    "title_before": title_before,
                    "title_after": title_after,
                    "is_current": item is not None and version["version"] == item.version and bool(after),
                    "restorable": can_restore
                    and version["operation"] in ("remember", "update")
                    and bool(after)
                    and version["version"] != item.version,
                }
            )
        context = {
            **self.admin_site.each_context(request),
            "title": f"Versions of memory item #{item_id}",
            "subtitle": None,
            "opts": self.model._meta,
            "object_id": item_id,
            "item": item,
            "namespace": namespace,
            "rows": rows,
            "restore_url": reverse("admin:memory_memoryitem_restore", args=[item_id]),
            **(extra_context or {}),
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/memory/memoryitem/versions.html", context)

    def restore_version_view(self, request, item_id: int):
        """Restore one version through the Memory panel's restore service: a new version, version-checked, with
        provenance `staff`."""
        item = MemoryItem.objects.select_related("namespace").filter(pk=item_id).first()
        if item is None:
            raise Http404("No such memory item.")
        if not self.has_change_permission(request, item):
            raise PermissionDenied
        back = reverse("admin:memory_memoryitem_history", args=[item_id])
        try:
            version = int(request.POST.get("version", ""))
            expected = int(request.POST.get("expected_version", ""))
        except ValueError:
            self.message_user(request, "Not restored: the form named no version.", level=messages.ERROR)
            return redirect(back)
        try:
            result = memory_item_restore(
                namespace=item.namespace,
                item_id=item.pk,
                version=version,
                expected_version=expected,
                actor=_staff(request),
                provenance=Provenance("staff"),
            )
        except ConflictError as exc:
            self.message_user(
                request,
                f"Not restored: the item changed meanwhile (now version {exc.extra.get('current_version')}). "
                "Compare again and restore once more if you still want it.",
                level=messages.ERROR,
            )
        except ServiceError as exc:
            self.message_user(request, f"Not restored: {exc.message}", level=messages.ERROR)
        else:
            self.message_user(request, f"Version {version} restored: it is now version {result['item']['version']}.")
        return redirect(back)

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
