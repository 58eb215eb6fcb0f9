"""REST for API clients, mirroring the chat page. Thin: parse, check ownership, call a service or selector. Import
from here, not from submodules."""

from .memory_writes import ChatBranchMemoryApi, ChatRunMemoryApi, ChatRunMemoryUndoApi
from .messages import (
    ChatMessageEditApi,
    ChatMessageFeedbackApi,
    ChatMessageRegenerateApi,
    ChatMessageSendApi,
    ChatMessageSwitchApi,
)
from .runs import ChatRunApi, ChatRunRequestApi, ChatRunStopApi
from .serializers import (
    ERROR_RESPONSE,
    REFUSALS,
    MessageOutputSerializer,
    RunOutputSerializer,
    ThreadOutputSerializer,
    message_text_field,
)
from .thread import ChatClearApi, ChatThreadApi

__all__ = [
    "ERROR_RESPONSE",
    "REFUSALS",
    "ChatBranchMemoryApi",
    "ChatClearApi",
    "ChatMessageEditApi",
    "ChatMessageFeedbackApi",
    "ChatMessageRegenerateApi",
    "ChatMessageSendApi",
    "ChatMessageSwitchApi",
    "ChatRunApi",
    "ChatRunMemoryApi",
    "ChatRunMemoryUndoApi",
    "ChatRunRequestApi",
    "ChatRunStopApi",
    "ChatThreadApi",
    "MessageOutputSerializer",
    "RunOutputSerializer",
    "ThreadOutputSerializer",
    "message_text_field",
]
