from django.contrib import admin

from .models import Schedule, TriggerFire


@admin.register(Schedule)
class ScheduleAdmin(admin.ModelAdmin):
    list_display = ("workflow", "node_id", "name", "cron", "every_minutes", "timezone", "next_due_at", "last_fired_at")
    readonly_fields = [f.name for f in Schedule._meta.fields]


@admin.register(TriggerFire)
class TriggerFireAdmin(admin.ModelAdmin):
    list_display = ("id", "workflow_id", "kind", "name", "due_at", "missed", "state", "error_code", "chat_run_id")
    list_filter = ("kind", "state")
    readonly_fields = [f.name for f in TriggerFire._meta.fields]
