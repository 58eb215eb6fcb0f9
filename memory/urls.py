from django.urls import path

from . import apis

urlpatterns = [
    path("workflows/<int:workflow_id>/memory/<str:node_id>/items/", apis.MemoryItemsApi.as_view(), name="memory-items"),
    path(
        "workflows/<int:workflow_id>/memory/<str:node_id>/items/<int:item_id>/",
        apis.MemoryItemApi.as_view(),
        name="memory-item",
    ),
    path("workflows/<int:workflow_id>/memory/<str:node_id>/clear/", apis.MemoryClearApi.as_view(), name="memory-clear"),
    path(
        "workflows/<int:workflow_id>/memory/<str:node_id>/history/",
        apis.MemoryHistoryApi.as_view(),
        name="memory-history",
    ),
    path(
        "workflows/<int:workflow_id>/memory/<str:node_id>/items/<int:item_id>/restore/",
        apis.MemoryItemRestoreApi.as_view(),
        name="memory-item-restore",
    ),
]
