from django.urls import path

from . import apis

urlpatterns = [
    path(
        "workflows/<int:workflow_id>/mcp-servers/<str:node_id>/tools/",
        apis.McpServerToolsApi.as_view(),
        name="mcp-server-tools",
    ),
]
