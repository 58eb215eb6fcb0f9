"""Model capabilities, token measuring (count endpoints through the real SDKs), summarize over a provider."""

import typing
from pathlib import Path

import pytest
from anthropic import types as anthropic_types
from openai.types import shared as openai_shared

from providers import (
    ChatRequest,
    InvalidRequestError,
    capabilities,
    estimate_tokens,
    measure_active_context,
    pricing,
    summarize,
)
from providers.summarize import SUMMARY_INSTRUCTION
from providers.wire import text_message
from tests.fakes import ErrorReply, Text, Turn

from .loop import API_KEYS, MODELS
from .loop import request as build_request


def test_known_and_fallback_models():
    known = capabilities("openai", "gpt-4.1")
    assert known.known and known.context_window == 1047576 and not known.note
    dated = capabilities("openai", "gpt-4.1-2025-04-14")
    assert dated.known and dated.context_window == known.context_window
    unknown = capabilities("anthropic", "claude-future")
    assert not unknown.known and unknown.context_window == 200000
    assert "unknown model" in unknown.note
    assert capabilities("offline", "anything").max_output_tokens > 0
    with pytest.raises(InvalidRequestError):
        capabilities("nope", "x")


def _literal_names(alias) -> list[str]:
    names: list[str] = []
    for arg in typing.get_args(alias):
        if typing.get_origin(arg) is typing.Literal:
            names.extend(typing.get_args(arg))
    return names


# The Gemini SDK has no enumerated model list; these are the chat models its docstrings and samples name.
GEMINI_SDK_MODELS = [
    "gemini-2.5-pro",
    "gemini-2.5-flash",
    "gemini-2.5-flash-lite",
    "gemini-3-pro-preview",
    "gemini-3-flash-preview",
    "gemini-3.1-pro-preview",
    "gemini-3.1-flash-lite",
    "gemini-3.5-flash",
    "gemini-3.8-flash",
    "gemini-2.0-flash-001",
]


@pytest.mark.parametrize(
    ("provider", "models"),
    [
        ("anthropic", _literal_names(anthropic_types.ModelParam)),
        ("openai", _literal_names(openai_shared.ChatModel) + _literal_names(openai_shared.ResponsesModel)),
        ("gemini", GEMINI_SDK_MODELS),
    ],
)
def test_every_model_the_installed_sdk_lists_is_in_the_catalogue(provider, models):
    assert len(models) > 5
    unknown = [m for m in models if not capabilities(provider, m).known]
    assert unknown == []
    for model in models:
        caps = capabilities(provider, model)
        assert caps.context_window > 0 and caps.max_output_tokens > 0
        assert caps.thinking in ("none", "effort", "budget", "adaptive", "adaptive_only", "level")


def test_prices_come_from_the_pinned_genai_prices_dataset():
    from genai_prices import Usage, calc_price

    caps = capabilities("anthropic", "claude-sonnet-4-5")
    expected = calc_price(
        Usage(input_tokens=100_000, cache_read_tokens=40_000, cache_write_tokens=10_000, output_tokens=2_000),
        model_ref="claude-sonnet-4-5",
        provider_id="anthropic",
    ).total_price
    cost = caps.cost(input_tokens=100_000, cached_tokens=40_000, cache_creation_tokens=10_000, output_tokens=2_000)
    assert cost == pytest.approx(float(expected))
    # Cache reads are cheaper than input, cache writes dearer: the three are billed apart.
    plain = caps.cost(input_tokens=100_000, output_tokens=2_000)
    assert caps.cost(input_tokens=100_000, cached_tokens=50_000, output_tokens=2_000) < plain
    assert caps.cost(input_tokens=100_000, cache_creation_tokens=50_000, output_tokens=2_000) > plain
    assert pricing.call_cost(caps, input_tokens=1, output_tokens=1).source.startswith("genai-prices ")
    pyproject = (Path(__file__).parents[2] / "pyproject.toml").read_text()
    assert '"genai-prices==' in pyproject  # pinned: a new dataset release changes billed amounts


def test_catalogue_prices_only_where_the_dataset_has_none_and_unknown_models_get_no_price():
    deepseek = capabilities("openai_compatible", "deepseek-reasoner")
    assert not pricing.covered("openai_compatible", "deepseek-reasoner")
    assert pricing.call_cost(deepseek, input_tokens=1_000_000, output_tokens=0).source == "catalogue"
    assert deepseek.cost(input_tokens=1_000_000, output_tokens=0) == pytest.approx(0.28)
    for provider, model in [("openai", "gpt-99-unreleased"), ("openai_compatible", "my-local-finetune")]:
        caps = capabilities(provider, model)
        assert not caps.known and "unknown model" in caps.note
        assert caps.cost(input_tokens=1000, output_tokens=1000) is None  # no silent default price


def test_unknown_models_get_conservative_knobs():
    claude = capabilities("anthropic", "claude-nova-9")
    assert claude.thinking == "adaptive_only" and not claude.temperature  # the newest rules refuse the least
    compat = capabilities("openai_compatible", "some-model")
    assert compat.alternate_roles and not compat.replay_reasoning


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


@pytest.mark.parametrize(
    ("provider", "fixture", "refusal"),
    [
        ("openai", "openai_fake", "Incorrect API key provided"),
        ("anthropic", "anthropic_fake", "invalid x-api-key"),
        ("gemini", "gemini_fake", "API key not valid"),
        ("openai_compatible", "compat_fake", "Incorrect API key provided"),
    ],
)
def test_check_credentials_makes_one_model_list_call(provider, fixture, refusal, request):
    from providers import AuthError, check_credentials

    fake = request.getfixturevalue(fixture)
    fake.valid_keys = {"the-right-key-1234"}
    good = ChatRequest(provider=provider, model="", messages=[], api_key="the-right-key-1234", base_url=fake.base_url)
    check_credentials(good)
    assert [(r.method, r.path.rsplit("/", 1)[-1]) for r in fake.requests] == [("GET", "models")]
    bad = ChatRequest(provider=provider, model="", messages=[], api_key="a-wrong-key-98765", base_url=fake.base_url)
    with pytest.raises(AuthError, match=refusal) as caught:
        check_credentials(bad)
    assert "a-wrong-key-98765" not in caught.value.message
