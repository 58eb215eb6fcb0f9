from django.urls import path

from . import apis

urlpatterns = [
    path("mcp-servers/stdio/", apis.McpStdioServersApi.as_view(), name="mcp-stdio-servers"),
    path(
        "workflows/<int:workflow_id>/mcp-servers/<str:node_id>/tools/",
        apis.McpServerToolsApi.as_view(),
        name="mcp-server-tools",
    ),
]
