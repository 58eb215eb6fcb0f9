"""Model capabilities, token measuring (count endpoints through the real SDKs), summarize over a provider."""

import pytest

from conversations.wire import text_message
from providers import (
    ChatRequest,
    InvalidRequestError,
    capabilities,
    estimate_tokens,
    measure_active_context,
    summarize,
)
from providers.summarize import SUMMARY_INSTRUCTION
from tests.fakes import ErrorReply, Text, Turn

from .loop import API_KEYS, MODELS
from .loop import request as build_request


def test_known_and_fallback_models():
    known = capabilities("openai", "gpt-4.1")
    assert known.known and known.context_window == 1047576
    dated = capabilities("openai", "gpt-4.1-2025-04-14")
    assert dated.known and dated.context_window == known.context_window
    unknown = capabilities("anthropic", "claude-future")
    assert not unknown.known and unknown.context_window == 200000
    assert capabilities("offline", "anything").max_output_tokens > 0
    with pytest.raises(InvalidRequestError):
        capabilities("nope", "x")


def test_cost_bills_cached_input_at_its_rate():
    caps = capabilities("openai", "gpt-4.1")
    assert caps.cost(input_tokens=1_000_000, cached_tokens=1_000_000, output_tokens=0) == pytest.approx(0.5)
    assert caps.cost(input_tokens=1_000_000, cached_tokens=0, output_tokens=1_000_000) == pytest.approx(10.0)


def test_estimate_is_about_four_characters_per_token():
    req = ChatRequest(provider="offline", model="m", messages=[text_message("user", "x" * 4000)])
    assert 1000 <= estimate_tokens(req) <= 1010


@pytest.mark.parametrize(
    ("provider", "fixture", "path"),
    [
        ("openai", "openai_fake", "/v1/responses/input_tokens"),
        ("anthropic", "anthropic_fake", "/v1/messages/count_tokens"),
        ("gemini", "gemini_fake", ":countTokens"),
    ],
)
def test_measure_uses_the_count_endpoint(provider, fixture, path, request):
    fake = request.getfixturevalue(fixture)
    req = build_request(provider, fake, [text_message("system", "s"), text_message("user", "hello " * 50)])
    tokens = measure_active_context(req)
    assert fake.requests and fake.requests[-1].path.endswith(path)
    assert tokens > 10


def test_measure_falls_back_to_the_estimate_when_the_endpoint_fails(anthropic_fake):
    anthropic_fake.fail_counting = True
    req = build_request("anthropic", anthropic_fake, [text_message("user", "hello")])
    assert measure_active_context(req) == estimate_tokens(req)


def test_measure_offline_and_compatible_use_the_estimate():
    req = ChatRequest(provider="offline", model="m", messages=[text_message("user", "hello")])
    assert measure_active_context(req) == estimate_tokens(req)


def test_summarize_sends_one_transcript_request_and_returns_the_text(anthropic_fake, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEYS["anthropic"])
    monkeypatch.setenv("ANTHROPIC_BASE_URL", anthropic_fake.base_url)
    anthropic_fake.push(Turn([Text("  Ada likes tea.  ")]))
    messages = [
        text_message("system", "sys prompt"),
        text_message("user", "I am Ada and I like tea."),
        {
            "role": "assistant",
            "blocks": [{"type": "tool_call", "id": "t1", "name": "memory", "arguments_raw": "{}", "arguments": {}}],
        },
        {
            "role": "tool",
            "blocks": [
                {"type": "tool_result", "tool_call_id": "t1", "name": "memory", "content": "ok", "is_error": False}
            ],
        },
    ]
    summary = summarize(provider="anthropic", model=MODELS["anthropic"], messages=messages)
    assert summary == "Ada likes tea."
    body = anthropic_fake.last_body
    assert body["system"] == [{"type": "text", "text": "sys prompt", "cache_control": {"type": "ephemeral"}}]
    [user] = body["messages"]
    prompt = user["content"][0]["text"]
    assert prompt.startswith(SUMMARY_INSTRUCTION)
    assert "user: I am Ada and I like tea." in prompt and "tool memory returned: ok" in prompt
    assert "tools" not in body


def test_summarize_failure_raises_a_provider_error(openai_fake, monkeypatch):
    from providers import ServerError

    monkeypatch.setenv("OPENAI_BASE_URL", openai_fake.base_url)
    openai_fake.push(ErrorReply(500, "boom"))
    with pytest.raises(ServerError):
        summarize(provider="openai", model="gpt-5", messages=[text_message("user", "x")], api_key="sk-x-123456")


def test_openai_compatible_needs_a_base_url():
    req = ChatRequest(provider="openai_compatible", model="qwen3", messages=[text_message("user", "hi")])
    from providers import ChatUnifier

    with pytest.raises(InvalidRequestError, match="OPENAI_COMPATIBLE_BASE_URL"):
        ChatUnifier().chat(req)


def test_keys_and_base_urls_come_from_the_environment(compat_fake, monkeypatch):
    from providers import ChatUnifier

    monkeypatch.setenv("OPENAI_COMPATIBLE_BASE_URL", compat_fake.base_url)
    monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", "sk-from-env-123")
    compat_fake.push(Turn([Text("hi")]))
    req = ChatRequest(provider="openai_compatible", model="qwen3", messages=[text_message("user", "hi")])
    assert ChatUnifier().chat(req).message["blocks"] == [{"type": "text", "text": "hi"}]
    assert compat_fake.requests[-1].headers["authorization"] == "Bearer sk-from-env-123"


def test_unknown_provider_is_an_invalid_request():
    from providers import ChatUnifier

    with pytest.raises(InvalidRequestError, match="unknown provider"):
        ChatUnifier().chat(ChatRequest(provider="acme", model="m", messages=[]))
