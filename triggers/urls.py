from django.urls import path

from . import apis

urlpatterns = [
    path(
        "workflows/<int:workflow_id>/hooks/<str:node_id>/",
        apis.WebhookAddressApi.as_view(),
        name="webhook-address",
    ),
]
