from django.urls import path

from . import apis

urlpatterns = [
    path(
        "settings/conversations/",
        apis.OwnerConversationSettingsApi.as_view(),
        name="conversations-api-owner-settings",
    ),
    path(
        "workflows/<int:workflow_id>/conversations/",
        apis.ConversationListApi.as_view(),
        name="conversations-api-list",
    ),
    path(
        "workflows/<int:workflow_id>/conversations/<str:agent_node_id>/",
        apis.ConversationDetailApi.as_view(),
        name="conversations-api-detail",
    ),
]
