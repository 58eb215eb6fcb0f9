"""Truncated streams, Stop, events, and error mapping for each provider, through the real SDKs."""

import pytest

from providers import (
    AuthError,
    ContextTooLongError,
    RateLimitedError,
    ServerError,
    TruncatedStreamError,
)
from tests.fakes import Call, ErrorReply, Text, Think, Turn

from .loop import API_KEYS, opening, step

REMEMBER = '{"operation": "remember", "content": "tea is green"}'
PROVIDERS = ["openai", "anthropic", "gemini", "openai_compatible"]


@pytest.fixture
def fakes(openai_fake, anthropic_fake, gemini_fake, compat_fake):
    return {"openai": openai_fake, "anthropic": anthropic_fake, "gemini": gemini_fake, "openai_compatible": compat_fake}


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("cut", ["text", "tool_call", "thinking", "end"])
def test_a_stream_cut_before_its_terminal_event_raises_truncated(fakes, provider, cut):
    fake = fakes[provider]
    fake.push(Turn([Think("Planning it."), Text("Saving it now."), Call("memory", REMEMBER)], cut=cut))
    with pytest.raises(TruncatedStreamError) as caught:
        step(provider, fake, opening(), thinking="low")
    assert caught.value.code == "truncated"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_events_stream_text_and_tool_calls_but_never_thinking_text(fakes, provider):
    fake = fakes[provider]
    fake.push(Turn([Think("Private reasoning."), Text("Saving it now."), Call("memory", REMEMBER)]))
    events = []
    result = step(provider, fake, opening(), thinking="low", on_event=events.append)
    kinds = [e["type"] for e in events]
    assert "".join(e["text"] for e in events if e["type"] == "text_delta") == "Saving it now."
    [start] = [e for e in events if e["type"] == "tool_call_start"]
    assert start["name"] == "memory"
    deltas = "".join(e["delta"] for e in events if e["type"] == "tool_call_delta" and e["id"] == start["id"])
    assert deltas.replace(" ", "") == REMEMBER.replace(" ", "")
    assert kinds.index("thinking_start") < kinds.index("thinking_end")
    assert "Private reasoning" not in repr(events)
    assert result.stop_reason == "tool_use"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_stop_keeps_partial_text_marked_and_drops_the_unfinished_rest(fakes, provider):
    """Given a reply streaming thinking, text then a tool call, when Stop arrives during the text, then the
    result keeps the partial text (stopped), no tool call and no unsigned thinking."""
    fake = fakes[provider]
    fake.push(Turn([Think("Planning."), Text("Saving it now, please wait."), Call("memory", REMEMBER)]))
    seen = []

    def should_stop():
        return any(e["type"] == "text_delta" for e in seen)

    result = step(provider, fake, opening(), thinking="low", on_event=seen.append, should_stop=should_stop)
    assert result.stop_reason == "stopped"
    blocks = result.message["blocks"]
    assert not [b for b in blocks if b["type"] == "tool_call"]
    assert all(b.get("signature") for b in blocks if b["type"] == "thinking")
    [text] = [b for b in blocks if b["type"] == "text"]
    assert text["stopped"] is True
    assert text["text"] and "Saving it now, please wait.".startswith(text["text"])
    # The provider never reported usage for the interrupted call: estimated, and said so.
    assert result.usage.estimated and result.usage.input_tokens > 0 and result.usage.output_tokens > 0
    assert result.message["usage"]["estimated"] is True


@pytest.mark.parametrize("provider", PROVIDERS)
def test_max_tokens_is_reported(fakes, provider):
    fake = fakes[provider]
    fake.push(Turn([Text("A long answer that")], stop="max_tokens"))
    result = step(provider, fake, opening())
    assert result.stop_reason == "max_tokens"
    assert result.message["blocks"][0]["text"] == "A long answer that"


@pytest.mark.parametrize("provider", ["openai", "anthropic", "openai_compatible"])
def test_a_tool_call_cut_off_by_the_token_limit_is_not_kept(fakes, provider):
    fake = fakes[provider]
    fake.push(Turn([Text("Saving."), Call("memory", '{"operation": "remember", "content": "te')], stop="max_tokens"))
    result = step(provider, fake, opening())
    assert result.stop_reason == "max_tokens"
    assert result.message["blocks"] == [{"type": "text", "text": "Saving."}]


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(
    ("reply", "error", "attrs"),
    [
        (ErrorReply(401, "Incorrect API key provided: {key}"), AuthError, {}),
        (
            ErrorReply(429, "Rate limit reached for requests", headers={"retry-after": "7"}),
            RateLimitedError,
            {"retry_after": 7.0},
        ),
        (ErrorReply(500, "The server had an error"), ServerError, {}),
        (
            ErrorReply(400, "prompt is too long: exceeds the context window (input token count too many tokens)"),
            ContextTooLongError,
            {},
        ),
    ],
    ids=["auth", "rate_limited", "server_error", "context_too_long"],
)
def test_http_errors_map_to_typed_errors_without_the_key(fakes, provider, reply, error, attrs):
    fake = fakes[provider]
    key = API_KEYS[provider]
    fake.push(ErrorReply(reply.status, reply.message.format(key=key), headers=reply.headers))
    with pytest.raises(error) as caught:
        step(provider, fake, opening())
    assert key not in caught.value.message and key not in str(caught.value)
    assert key not in repr(caught.value.to_dict())
    for name, value in attrs.items():
        if provider == "gemini" and name == "retry_after":
            continue  # Gemini puts the delay in the error details, not a header
        assert getattr(caught.value, name) == value
    assert len(fake.requests) == 1, "one attempt: the SDKs must not retry"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_unreachable_server_is_a_network_error(provider):
    from providers import NetworkError

    class Closed:
        base_url = "http://127.0.0.1:9/v1"

    with pytest.raises(NetworkError):
        step(provider, Closed(), opening())


def test_openai_stream_error_event_is_typed(openai_fake):
    from tests.fakes.base import SSE, sse_frame

    openai_fake.push(
        SSE(
            [
                sse_frame(
                    {"type": "error", "code": "rate_limit_exceeded", "message": "slow down", "sequence_number": 0},
                    "error",
                )
            ]
        )
    )
    with pytest.raises(RateLimitedError, match="slow down"):
        step("openai", openai_fake, opening())


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_stopped_reply_replays(fakes, provider):
    """Given a reply stopped mid-text after its thinking closed, when the stored conversation continues, then the
    provider accepts the replay (nothing half-received or orphaned is sent back)."""
    from providers.wire import text_message

    from .loop import store_and_load

    fake = fakes[provider]
    fake.push(Turn([Think("Planning."), Text("Saving it now, please wait."), Call("memory", REMEMBER)]))
    seen = []
    stopped = step(
        provider,
        fake,
        opening(),
        thinking="low",
        on_event=seen.append,
        should_stop=lambda: any(e["type"] == "text_delta" for e in seen),
    )
    assert stopped.stop_reason == "stopped"
    loaded = store_and_load([*opening(), stopped.message, text_message("user", "Go on.")])
    fake.push(Turn([Text("Continuing.")]))
    result = step(provider, fake, loaded, thinking="low")
    assert result.message["blocks"][0]["text"] == "Continuing."
    assert not fake.rejections


def test_invalid_wire_input_is_an_invalid_request(openai_fake):
    from providers import InvalidRequestError

    with pytest.raises(InvalidRequestError, match=r"messages\[0\]: invalid tool_result block"):
        step("openai", openai_fake, [{"role": "tool", "blocks": [{"type": "tool_result", "tool_call_id": "x"}]}])
    assert openai_fake.requests == []


def test_anthropic_stream_error_event_is_typed(anthropic_fake):
    from tests.fakes.base import SSE, sse_frame

    anthropic_fake.push(
        SSE(
            [
                sse_frame({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, "error"),
            ]
        )
    )
    with pytest.raises(ServerError, match="Overloaded"):
        step("anthropic", anthropic_fake, opening())


@pytest.mark.parametrize("provider", PROVIDERS)
def test_stop_does_not_wait_for_a_slow_provider(fakes, provider):
    """Given a provider that goes silent after its first text delta, when Stop is pressed during that silence, then
    the call returns with the text so far while the provider is still silent, instead of waiting for its next
    event."""
    import threading

    fake = fakes[provider]
    fake.push(Turn([Text("Saving it now, please wait.")], pause_after_first_text_s=60))
    stop = threading.Event()

    def on_event(event):
        if event["type"] == "text_delta" and not stop.is_set():
            fake.wait_until_silent()  # Stop is pressed during the silence, not before it began
            stop.set()

    result = step(provider, fake, opening(), on_event=on_event, should_stop=stop.is_set)
    assert fake.silent  # returned while the provider had not said another word
    assert result.stop_reason == "stopped"
    [text] = result.message["blocks"]
    assert text["stopped"] is True and "Saving it now, please wait.".startswith(text["text"])


def test_sockets_to_anything_but_loopback_fail():
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        with pytest.raises(RuntimeError, match="127.0.0.1"):
            sock.connect(("192.0.2.1", 443))
