from django.urls import path

from . import apis

prefix = "workflows/<int:workflow_id>/chat/"

urlpatterns = [
    path(prefix, apis.ChatThreadApi.as_view(), name="chat-thread"),
    path(prefix + "messages/", apis.ChatMessageSendApi.as_view(), name="chat-messages"),
    path(prefix + "messages/<int:message_id>/edit/", apis.ChatMessageEditApi.as_view(), name="chat-message-edit"),
    path(
        prefix + "messages/<int:message_id>/regenerate/",
        apis.ChatMessageRegenerateApi.as_view(),
        name="chat-message-regenerate",
    ),
    path(prefix + "messages/<int:message_id>/switch/", apis.ChatMessageSwitchApi.as_view(), name="chat-message-switch"),
    path(
        prefix + "messages/<int:message_id>/feedback/",
        apis.ChatMessageFeedbackApi.as_view(),
        name="chat-message-feedback",
    ),
    path(prefix + "runs/<int:run_id>/", apis.ChatRunApi.as_view(), name="chat-run"),
    path(prefix + "runs/<int:run_id>/stop/", apis.ChatRunStopApi.as_view(), name="chat-run-stop"),
    path(prefix + "runs/<int:run_id>/memory/", apis.ChatRunMemoryApi.as_view(), name="chat-run-memory"),
    path(prefix + "runs/<int:run_id>/request/", apis.ChatRunRequestApi.as_view(), name="chat-run-request"),
    path(prefix + "runs/<int:run_id>/memory/undo/", apis.ChatRunMemoryUndoApi.as_view(), name="chat-run-memory-undo"),
    path(
        prefix + "messages/<int:message_id>/branch-memory/",
        apis.ChatBranchMemoryApi.as_view(),
        name="chat-branch-memory",
    ),
    path(prefix + "clear/", apis.ChatClearApi.as_view(), name="chat-clear"),
]
