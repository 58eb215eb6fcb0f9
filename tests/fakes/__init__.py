"""Local fake provider servers for offline tests (see base.py). Reusable by any test that needs a provider."""

from .anthropic import FakeAnthropic
from .base import Call, ErrorReply, RawReply, Text, Think, Turn
from .chat_completions import FakeChatCompletions
from .gemini import FakeGemini
from .openai_responses import FakeOpenAIResponses
from .vertex_interactions import Exec, FakeVertexInteractions

__all__ = [
    "Call",
    "ErrorReply",
    "Exec",
    "FakeAnthropic",
    "FakeChatCompletions",
    "FakeGemini",
    "FakeOpenAIResponses",
    "FakeVertexInteractions",
    "RawReply",
    "Text",
    "Think",
    "Turn",
]
