from django.apps import AppConfig


class McpNodesConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "mcp_nodes"
    verbose_name = "MCP servers"

    def ready(self) -> None:
        from workflows.nodes import register_node_spec

        from .node import MCP_SERVER

        register_node_spec(MCP_SERVER)
