from django.urls import path, re_path

from core.consumers import WorkflowConsumer, unknown_route

websocket_urlpatterns = [
    path("ws/workflows/<int:workflow_id>/", WorkflowConsumer.as_asgi()),
    # Last: any other path closes with 4404 instead of the router's "No route found" error (a 500).
    re_path(r"", unknown_route),
]
