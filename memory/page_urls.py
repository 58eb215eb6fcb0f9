from django.urls import path

from . import views

prefix = "workflows/<int:workflow_id>/memory/<str:node_id>/"

urlpatterns = [
    path(prefix, views.memory_panel, name="memory-panel"),
    path(prefix + "new/", views.memory_item_create, name="memory-panel-create"),
    path(prefix + "items/<int:item_id>/edit/", views.memory_item_edit, name="memory-panel-edit"),
    path(prefix + "items/<int:item_id>/forget/", views.memory_item_forget, name="memory-panel-forget"),
    path(prefix + "clear/", views.memory_clear, name="memory-panel-clear"),
]
