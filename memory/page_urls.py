from django.urls import path

from . import history_views, views

prefix = "workflows/<int:workflow_id>/memory/<str:node_id>/"

urlpatterns = [
    path(prefix, views.memory_panel, name="memory-panel"),
    path(prefix + "new/", views.memory_item_create, name="memory-panel-create"),
    path(prefix + "items/<int:item_id>/edit/", views.memory_item_edit, name="memory-panel-edit"),
    path(prefix + "items/<int:item_id>/forget/", views.memory_item_forget, name="memory-panel-forget"),
    path(prefix + "clear/", views.memory_clear, name="memory-panel-clear"),
    path(prefix + "history/", history_views.memory_history_page, name="memory-history-page"),
    path(
        prefix + "items/<int:item_id>/history/",
        history_views.memory_item_history_page,
        name="memory-item-history-page",
    ),
    path(
        prefix + "items/<int:item_id>/restore/",
        history_views.memory_item_restore_page,
        name="memory-item-restore-page",
    ),
]
