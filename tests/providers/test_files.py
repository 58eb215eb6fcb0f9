"""Attached files (`file` blocks) reach each provider in its documented form, checked by the strict fakes, which
refuse a wrong shape the way the provider does; text-only models get extracted text and placeholders; a file a
provider's documented limits refuse ends the turn naming it, and the stored conversation stays answerable."""

from __future__ import annotations

import base64
import copy
import json

import anthropic
import openai
import pytest

from providers import ChatRequest, ChatUnifier, files_support
from providers.attachments import FileRefused, describe
from providers.errors import InvalidRequestError
from providers.wire import text_block, text_message
from tests.fakes import Text, Turn
from tests.file_samples import CSV, JSON, gif, pdf, png, registered_store

from .loop import API_KEYS, step


@pytest.fixture
def store():
    with registered_store() as files:
        yield files


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def user(*blocks) -> dict:
    return {"role": "user", "blocks": list(blocks)}


def chat(provider: str, model: str, fake, messages: list[dict]):
    request = ChatRequest(
        provider=provider, model=model, messages=messages, api_key=API_KEYS[provider], base_url=fake.base_url
    )
    return ChatUnifier().chat(request)


def parts_of(body_input: list[dict]) -> list[dict]:
    return [part for item in body_input if item.get("role") == "user" for part in item["content"]]


# --- OpenAI Responses --------------------------------------------------------------------------------------------


def test_openai_gets_input_image_and_input_file_with_data_urls(openai_fake, store):
    image = store.add(png(), name="shot.png", media_type="image/png")
    report = store.add(pdf(2), name="report.pdf", media_type="application/pdf")
    table = store.add(CSV, name="table.csv", media_type="text/csv")
    messages = [user(text_block("What is in these?"), image, report, table)]
    before = copy.deepcopy(messages)
    openai_fake.push(Turn([Text("A red square, an invoice and a table.")]))
    result = step("openai", openai_fake, messages, tools=[])
    assert result.stop_reason == "end_turn"
    assert parts_of(openai_fake.last_body["input"]) == [
        {"type": "input_text", "text": "What is in these?"},
        {"type": "input_image", "image_url": f"data:image/png;base64,{b64(png())}", "detail": "auto"},
        {"type": "input_file", "filename": "report.pdf", "file_data": f"data:application/pdf;base64,{b64(pdf(2))}"},
        {"type": "input_file", "filename": "table.csv", "file_data": f"data:text/csv;base64,{b64(CSV)}"},
    ]
    assert messages == before  # the stored conversation keeps the reference, never the bytes
    assert b64(png()) not in json.dumps(messages)


def test_openai_fake_refuses_what_the_api_refuses(openai_fake):
    client = openai.OpenAI(api_key=API_KEYS["openai"], base_url=openai_fake.base_url, max_retries=0)
    wrong = [
        # input_file with file_data but no filename
        {"type": "input_file", "file_data": f"data:application/pdf;base64,{b64(pdf(1))}"},
        # a PDF passed off as an image
        {"type": "input_image", "image_url": f"data:application/pdf;base64,{b64(pdf(1))}", "detail": "auto"},
        # our own block type, not the API's
        {"type": "file", "sha256": "ab"},
    ]
    for part in wrong:
        with pytest.raises(openai.BadRequestError):
            client.responses.create(model="gpt-5", input=[{"role": "user", "content": [part]}], store=False)
    assert len(openai_fake.rejections) == 3


def test_openai_text_only_model_gets_extracted_text_and_a_placeholder(openai_fake, store):
    image = store.add(png(), name="shot.png", media_type="image/png")
    report = store.add(pdf(2), name="report.pdf", media_type="application/pdf")
    openai_fake.push(Turn([Text("ok")]))
    chat("openai", "gpt-3.5-turbo", openai_fake, [user(text_block("read"), image, report)])
    sent = parts_of(openai_fake.last_body["input"])
    assert [p["type"] for p in sent] == ["input_text"] * 3
    assert (
        sent[1]["text"].startswith('[image "shot.png" (image/png, ')
        and "gpt-3.5-turbo takes text only" in sent[1]["text"]
    )
    assert "Invoice 42 total 17 EUR page 1" in sent[2]["text"] and "page 2" in sent[2]["text"]
    assert sent[2]["text"].startswith('[file "report.pdf" (application/pdf, 2 pages)')


# --- Anthropic ---------------------------------------------------------------------------------------------------


def test_anthropic_gets_image_and_document_blocks(anthropic_fake, store):
    image = store.add(png(), name="shot.png", media_type="image/png")
    report = store.add(pdf(3), name="report.pdf", media_type="application/pdf")
    notes = store.add(b"# Notes\nbuy milk", name="notes.md", media_type="text/markdown")
    anthropic_fake.push(Turn([Text("ok")]))
    step("anthropic", anthropic_fake, [user(text_block("look"), image, report, notes)], tools=[])
    content = anthropic_fake.last_body["messages"][0]["content"]
    for block in content:
        block.pop("cache_control", None)
    assert content == [
        {"type": "text", "text": "look"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64(png())}},
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": b64(pdf(3))},
            "title": "report.pdf",
        },
        {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": "# Notes\nbuy milk"},
            "title": "notes.md",
        },
    ]


def test_anthropic_fake_refuses_a_mislabelled_image_and_too_many_pages(anthropic_fake):
    client = anthropic.Anthropic(api_key=API_KEYS["anthropic"], base_url=anthropic_fake.base_url, max_retries=0)
    mislabelled = {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": b64(png())}}
    long_pdf = {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": b64(pdf(101))},
    }
    for block in (mislabelled, long_pdf):
        with pytest.raises(anthropic.BadRequestError):
            client.messages.create(
                model="claude-sonnet-4-5", max_tokens=100, messages=[{"role": "user", "content": [block]}]
            )
    assert "appears to be a image/png image" in anthropic_fake.rejections[0].message
    assert anthropic_fake.rejections[1].message == "A maximum of 100 PDF pages may be provided."


def test_a_pdf_over_the_page_limit_ends_the_turn_naming_it_and_the_conversation_stays_answerable(anthropic_fake, store):
    long_pdf = store.add(pdf(101), name="minutes.pdf", media_type="application/pdf")
    messages = [user(text_block("summarize"), long_pdf)]
    with pytest.raises(FileRefused) as refused:
        step("anthropic", anthropic_fake, messages, tools=[])
    assert refused.value.code == "invalid_request"
    assert "minutes.pdf was not sent: it has 101 pages and Anthropic takes at most 100 per PDF" in str(refused.value)
    assert anthropic_fake.requests == []  # refused before anything was sent (nothing billed)
    # The owner goes on: the refused file is an earlier turn's now, and goes as its text.
    messages.append(text_message("user", "then just tell me the total"))
    anthropic_fake.push(Turn([Text("17 EUR")]))
    result = step("anthropic", anthropic_fake, messages, tools=[])
    assert result.stop_reason == "end_turn"
    sent = anthropic_fake.last_body["messages"][0]["content"]
    assert sent[1]["type"] == "text" and "Invoice 42 total 17 EUR page 101" in sent[1]["text"]
    assert "101 pages and Anthropic takes at most 100" in sent[1]["text"]


# --- Gemini ------------------------------------------------------------------------------------------------------


def _gemini_parts(fake) -> list[dict]:
    return [p for c in fake.last_body["contents"] if c["role"] == "user" for p in c["parts"]]


def test_gemini_gets_inline_data(gemini_fake, store):
    image = store.add(png(), name="shot.png", media_type="image/png")
    report = store.add(pdf(1), name="report.pdf", media_type="application/pdf")
    data = store.add(JSON, name="data.json", media_type="application/json")
    gemini_fake.push(Turn([Text("ok")]))
    step("gemini", gemini_fake, [user(text_block("look"), image, report, data)], tools=[])
    parts = _gemini_parts(gemini_fake)
    assert parts[0] == {"text": "look"}
    blobs = [p.get("inlineData") or p.get("inline_data") for p in parts[1:]]
    assert [b.get("mimeType") or b.get("mime_type") for b in blobs] == ["image/png", "application/pdf", "text/plain"]
    decoded = [base64.urlsafe_b64decode(b["data"] + "=" * (-len(b["data"]) % 4)) for b in blobs]
    assert decoded == [png(), pdf(1), JSON]


def test_gemini_fake_refuses_a_json_mime_type_and_a_gif_is_refused_before_sending(gemini_fake, store):
    from google import genai
    from google.genai import errors, types

    client = genai.Client(api_key=API_KEYS["gemini"], http_options=types.HttpOptions(base_url=gemini_fake.base_url))
    with pytest.raises(errors.ClientError):
        list(
            client.models.generate_content_stream(
                model="gemini-2.5-pro", contents=[types.Part.from_bytes(data=JSON, mime_type="application/json")]
            )
        )
    assert gemini_fake.rejections[-1].message == "Unsupported MIME type: application/json"
    animation = store.add(gif(), name="dance.gif", media_type="image/gif")
    with pytest.raises(FileRefused, match="dance.gif was not sent: Gemini does not take image/gif images"):
        step("gemini", gemini_fake, [user(text_block("look"), animation)], tools=[])
    # In an earlier turn the GIF goes as a line naming it, and the request passes.
    gemini_fake.push(Turn([Text("ok")]))
    step("gemini", gemini_fake, [user(animation), text_message("user", "and now?")], tools=[])
    assert '[image "dance.gif" (image/gif, ' in _gemini_parts(gemini_fake)[0]["text"]


# --- OpenAI-compatible -------------------------------------------------------------------------------------------


def test_compatible_server_gets_image_url_only_for_a_vision_model(compat_fake, store):
    compat_fake.vision_models = {"llava:13b"}
    image = store.add(png(), name="shot.png", media_type="image/png")
    report = store.add(pdf(1), name="report.pdf", media_type="application/pdf")
    compat_fake.push(Turn([Text("ok")]), Turn([Text("ok")]))
    chat("openai_compatible", "llava:13b", compat_fake, [user(text_block("look"), image, report)])
    content = compat_fake.last_body["messages"][-1]["content"]
    assert content[1] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64(png())}"}}
    assert content[2]["type"] == "text" and "Invoice 42 total 17 EUR page 1" in content[2]["text"]
    # A text-only model: the image becomes a line naming it (the server would refuse image_url).
    chat("openai_compatible", "qwen3:8b", compat_fake, [user(text_block("look"), image)])
    sent = compat_fake.last_body["messages"][-1]["content"]
    assert isinstance(sent, str) and '[image "shot.png" (image/png, ' in sent and "qwen3:8b takes text only" in sent


def test_compatible_fake_refuses_images_for_a_text_only_model(compat_fake):
    client = openai.OpenAI(api_key="sk-local", base_url=compat_fake.base_url, max_retries=0)
    part = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64(png())}"}}
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="qwen3:8b", messages=[{"role": "user", "content": [part]}])
    assert compat_fake.rejections[-1].message == "qwen3:8b is not a multimodal model"


# --- what the chat is told, and files that are gone --------------------------------------------------------------


def test_files_support_says_what_a_text_only_model_will_get():
    files = [
        {"name": "shot.png", "media_type": "image/png", "size": 10},
        {"name": "report.pdf", "media_type": "application/pdf", "size": 10},
    ]
    assert files_support("openai", "gpt-5").notice(files) == ""
    assert [f["form"] for f in files_support("openai", "gpt-5").describe(files)] == ["native", "native"]
    text_only = files_support("openai", "gpt-3.5-turbo")
    assert [f["form"] for f in text_only.describe(files)] == ["placeholder", "text"]
    notice = text_only.notice(files)
    assert "shot.png as a line naming it: this model does not take images" in notice
    assert "report.pdf as its extracted text" in notice
    assert [f["form"] for f in files_support("openai_compatible", "llava:7b").describe(files)] == ["native", "text"]
    assert files_support("claude_code", "claude-sonnet-4-5").describe(files)[0]["form"] == "workspace"


def test_a_file_no_longer_stored_goes_as_a_line_naming_it(anthropic_fake, store):
    gone = {"type": "file", "sha256": "0" * 64, "media_type": "application/pdf", "name": "old.pdf", "size": 2048}
    anthropic_fake.push(Turn([Text("ok")]))
    step("anthropic", anthropic_fake, [user(text_block("and this?"), gone)], tools=[])
    sent = anthropic_fake.last_body["messages"][0]["content"]
    assert sent[1]["text"] == '[file "old.pdf" (application/pdf, 2 KB) is no longer stored: not sent]'


def test_file_refused_is_an_invalid_request():
    assert issubclass(FileRefused, InvalidRequestError)


# --- counting, compaction and the request view -------------------------------------------------------------------


def _estimate(provider: str, model: str, messages: list[dict]) -> int:
    from providers import estimate_tokens

    return estimate_tokens(ChatRequest(provider=provider, model=model, messages=messages))


def test_the_estimate_counts_an_image_and_pdf_pages_by_each_providers_rule(store):
    image = store.add(png(1024, 1024), name="big.png", media_type="image/png")
    report = store.add(pdf(3), name="report.pdf", media_type="application/pdf")
    base = {
        p: _estimate(p, m, [text_message("user", "x")]) for p, m in (("openai", "gpt-5"), ("gemini", "gemini-2.5-pro"))
    }
    with_image = [user(text_block("x"), image)]
    # OpenAI's images guide: 1024 x 1024 at high detail is 4 tiles: 85 + 4 x 170 = 765.
    assert _estimate("openai", "gpt-5", with_image) - base["openai"] == 765
    # Anthropic's vision guide: width x height / 750.
    assert _estimate("anthropic", "claude-sonnet-4-5", with_image) - base["openai"] == 1024 * 1024 // 750
    # Gemini: 258 per 682 px tile (the smaller side / 1.5): 2 x 2 tiles.
    assert _estimate("gemini", "gemini-2.5-pro", with_image) - base["gemini"] == 4 * 258
    # Gemini's document guide: 258 tokens a page.
    assert _estimate("gemini", "gemini-2.5-pro", [user(text_block("x"), report)]) - base["gemini"] == 3 * 258
    # A text-only model is sent the extracted text only.
    text_only = _estimate("openai", "gpt-3.5-turbo", [user(text_block("x"), report)]) - base["openai"]
    assert 20 < text_only < 3 * 765


def test_a_summary_keeps_the_references_of_the_files_it_summarizes_away(anthropic_fake, store):
    from providers import summarize
    from providers.summarize import render_transcript

    report = store.add(pdf(1), name="report.pdf", media_type="application/pdf")
    messages = [user(text_block("here is the invoice"), report), text_message("assistant", "It says 17 EUR.")]
    assert f"user attached [file {describe(report)} sha256:{report['sha256']}]" in render_transcript(messages)
    anthropic_fake.push(Turn([Text("The owner sent an invoice of 17 EUR.")]))
    summary = summarize(
        provider="anthropic",
        model="claude-sonnet-4-5",
        messages=messages,
        api_key="k",
        base_url=anthropic_fake.base_url,
    )
    assert summary.startswith("The owner sent an invoice of 17 EUR.\n\nFiles attached in the summarized turns")
    assert summary.endswith(f"- [file {describe(report)} sha256:{report['sha256']}]")
    assert b64(pdf(1)) not in json.dumps(anthropic_fake.last_body)  # the summary request carries the reference only


def test_the_request_view_lists_attachments_by_name_type_and_size_never_bytes(store):
    from types import SimpleNamespace

    from agents.services.execute import _request_info

    report = store.add(pdf(1), name="report.pdf", media_type="application/pdf")
    firing = SimpleNamespace(stored_prefix={"length": 1}, pending_messages=[], tool_bindings=[])
    info = _request_info(firing, [user(text_block("read"), report)])
    assert info["attachments"] == [{"name": "report.pdf", "media_type": "application/pdf", "size": len(pdf(1))}]
    assert report["sha256"] not in json.dumps(info)


def test_gemini_moves_files_above_the_inline_limit_to_its_files_api_once(gemini_fake, store, monkeypatch):
    monkeypatch.setenv("GEMINI_INLINE_LIMIT_BYTES", "1000")
    gemini_fake.max_inline_bytes = 1000  # the documented limit, scaled down for the test
    image = store.add(png(), name="shot.png", media_type="image/png")
    report = store.add(pdf(3), name="report.pdf", media_type="application/pdf")
    assert len(pdf(3)) > 1000
    messages = [user(text_block("look"), image, report)]
    gemini_fake.push(Turn([Text("ok")]), Turn([Text("again")]))
    step("gemini", gemini_fake, messages, tools=[])
    [uploaded] = gemini_fake.uploaded.values()
    assert uploaded["data"] == pdf(3) and uploaded["mimeType"] == "application/pdf"
    assert uploaded["displayName"] == "report.pdf"
    parts = _gemini_parts(gemini_fake)
    assert "inlineData" in parts[1] or "inline_data" in parts[1]  # the small image stays inline
    file_data = parts[2].get("fileData") or parts[2].get("file_data")
    assert (file_data.get("fileUri") or file_data.get("file_uri")) == uploaded["uri"]
    # The next request of the conversation uses the same upload.
    messages += [text_message("assistant", "ok"), text_message("user", "and the total?")]
    step("gemini", gemini_fake, messages, tools=[])
    assert len(gemini_fake.uploaded) == 1
    assert uploaded["uri"] in json.dumps(gemini_fake.last_body)


def test_a_provider_refusing_an_earlier_file_gets_the_request_again_with_that_file_as_text(anthropic_fake, store):
    from tests.fakes.base import ErrorReply

    image = store.add(png(), name="shot.png", media_type="image/png")
    report = store.add(pdf(1), name="report.pdf", media_type="application/pdf")
    # A rule no documentation foresaw: the provider refuses a file it took before.
    anthropic_fake.push(ErrorReply(400, "messages.0.content.1.image.source.base64: Could not process image"))
    anthropic_fake.push(Turn([Text("Still here.")]))
    messages = [user(text_block("look"), image, report), text_message("assistant", "ok"), text_message("user", "go on")]
    result = step("anthropic", anthropic_fake, messages, tools=[])
    assert result.stop_reason == "end_turn" and len(anthropic_fake.requests) == 2
    resent = anthropic_fake.last_body["messages"][0]["content"]
    assert [b["type"] for b in resent] == ["text", "text", "text"]
    assert '[image "shot.png"' in resent[1]["text"] and "Anthropic refused the request with it" in resent[1]["text"]
    assert "Invoice 42 total 17 EUR page 1" in resent[2]["text"]
    assert "Could not process image" in result.message["meta"]["notes"][0]


def test_a_provider_refusing_a_file_of_the_new_message_ends_the_turn_with_its_reason(anthropic_fake, store):
    from tests.fakes.base import ErrorReply

    image = store.add(png(), name="shot.png", media_type="image/png")
    anthropic_fake.push(ErrorReply(400, "messages.0.content.1.image.source.base64: Could not process image"))
    with pytest.raises(InvalidRequestError, match="Could not process image"):
        step("anthropic", anthropic_fake, [user(text_block("look"), image)], tools=[])
    assert len(anthropic_fake.requests) == 1


def test_openai_gets_a_filename_with_the_extension_its_type_has(openai_fake, store):
    readme = store.add(b"plain words", name="README", media_type="text/plain")
    openai_fake.push(Turn([Text("ok")]))
    step("openai", openai_fake, [user(text_block("read"), readme)], tools=[])
    assert parts_of(openai_fake.last_body["input"])[1]["filename"] == "README.txt"
    assert not openai_fake.rejections  # the API reads an input_file by its extension; "README" alone is refused
