"""Django admin for staff: workflows, generations, outbox, legacy imports, todos.

Reset / Clear context / Clear memory each show a confirmation page first and then call the same services the
API uses; nothing here writes around them."""

from __future__ import annotations

from django.contrib import admin, messages
from django.template.response import TemplateResponse

from core.errors import ServiceError

from . import services
from .models import ArchiveOutbox, LegacyImportRecord, TodoItem, Workflow, WorkflowGeneration
from .outbox import archive_outbox_process

CONFIRM_TEMPLATE = "workflows/admin_confirm.html"


def _confirm(modeladmin, request, queryset, *, action: str, title: str, explanation: str):
    """The intermediate page; returns None once the staff member confirmed (the POST carries `confirm`)."""
    if request.POST.get("confirm") == "yes":
        return None
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": title,
        "explanation": explanation,
        "action": action,
        "workflows": list(queryset),
        "opts": modeladmin.model._meta,
        "action_checkbox_name": admin.helpers.ACTION_CHECKBOX_NAME,
    }
    return TemplateResponse(request, CONFIRM_TEMPLATE, context)


@admin.action(description="Reset workflow (new generation; conversations cleared; memory per reset_policy)")
def reset_workflows(modeladmin, request, queryset):
    page = _confirm(
        modeladmin,
        request,
        queryset,
        action="reset_workflows",
        title="Reset workflows",
        explanation="Ends live runs, clears conversations and the chat thread, applies each Memory node's "
        "reset_policy, clears todos and admits a fresh generation.",
    )
    if page is not None:
        return page
    for workflow in queryset:
        try:
            outcome = services.workflow_reset(workflow=workflow, actor=request.user)
        except ServiceError as exc:
            modeladmin.message_user(request, f"{workflow}: {exc.message}", messages.ERROR)
            continue
        modeladmin.message_user(request, f"{workflow}: reset to generation {outcome.generation.number}.")
    return None


@admin.action(description="Clear context (stored conversations; memory untouched)")
def clear_context(modeladmin, request, queryset):
    page = _confirm(
        modeladmin,
        request,
        queryset,
        action="clear_context",
        title="Clear context",
        explanation="Deletes the stored conversations of these workflows' agents. Memory is kept.",
    )
    if page is not None:
        return page
    for workflow in queryset:
        row = services.workflow_context_clear(workflow=workflow)
        # Run the job now so the page reports the result; the on-commit drain then finds it done.
        done = archive_outbox_process(row_id=row.pk)
        row.refresh_from_db()
        level = messages.SUCCESS if done else messages.WARNING
        modeladmin.message_user(request, f"{workflow}: context clear {row.state} {row.result or ''}", level)
    return None


@admin.action(description="Clear memory (memory items only)")
def clear_memory(modeladmin, request, queryset):
    page = _confirm(
        modeladmin,
        request,
        queryset,
        action="clear_memory",
        title="Clear memory",
        explanation="Removes the memory items of every Memory node of these workflows. Conversations are kept.",
    )
    if page is not None:
        return page
    for workflow in queryset:
        try:
            cleared = services.workflow_memory_clear(workflow=workflow, actor=request.user)
        except ServiceError as exc:
            modeladmin.message_user(request, f"{workflow}: {exc.message}", messages.ERROR)
            continue
        modeladmin.message_user(request, f"{workflow}: removed {sum(cleared.values())} memory items.")
    return None


class GenerationInline(admin.TabularInline):
    model = WorkflowGeneration
    fields = ("number", "state", "admitted_by", "graph_revision", "started_at", "ended_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    ordering = ("-number",)
    show_change_link = True

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Workflow)
class WorkflowAdmin(admin.ModelAdmin):
    list_display = ("id", "name", "owner", "live_generation", "node_count", "edge_count", "revision", "updated_at")
    list_select_related = ("owner",)
    search_fields = ("name", "owner__username")
    readonly_fields = ("graph", "graph_version", "revision", "live_generation", "created_at", "updated_at")
    fields = ("owner", "name") + readonly_fields
    actions = [reset_workflows, clear_context, clear_memory]
    inlines = [GenerationInline]

    @admin.display(description="nodes")
    def node_count(self, obj):
        return len((obj.graph or {}).get("nodes", []))

    @admin.display(description="edges")
    def edge_count(self, obj):
        return len((obj.graph or {}).get("edges", []))


class _ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(WorkflowGeneration)
class WorkflowGenerationAdmin(_ReadOnlyAdmin):
    list_display = ("workflow", "number", "state", "admitted_by", "started_at", "ended_at")
    list_filter = ("state", "admitted_by")
    list_select_related = ("workflow",)


@admin.register(ArchiveOutbox)
class ArchiveOutboxAdmin(_ReadOnlyAdmin):
    list_display = ("id", "workflow_id", "reason", "state", "attempts", "created_at", "processed_at")
    list_filter = ("state", "reason")


@admin.register(LegacyImportRecord)
class LegacyImportRecordAdmin(_ReadOnlyAdmin):
    list_display = ("id", "workflow", "kind", "agent_node_id", "context_node_id", "created_at")
    list_select_related = ("workflow",)

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(TodoItem)
class TodoItemAdmin(admin.ModelAdmin):
    list_display = ("id", "workflow", "node_id", "order", "done", "text")
    list_select_related = ("workflow",)
