"""Attached files reach the agent runtimes: written into the working directory of Claude Code and Codex and named
in their prompt, readable at their paths by RLM's code in its sandbox, and sent to a Vertex interaction as its
image and document input. Each runtime runs for real against its fake."""

from __future__ import annotations

import base64
import json

import pytest

from providers import ChatRequest, ChatUnifier
from providers.attachments import describe
from providers.runtimes import RuntimeRun, attachment_paths, safe_file_name, write_attachments
from providers.wire import text_block, text_message
from tests.fakes import FakeChatCompletions
from tests.fakes.base import Text, Turn
from tests.file_samples import CSV, pdf, png, registered_store


@pytest.fixture
def store():
    with registered_store() as files:
        yield files


def user(*blocks) -> dict:
    return {"role": "user", "blocks": list(blocks)}


def _prompt_texts(body: dict) -> str:
    return json.dumps(body)


def test_file_names_stay_inside_the_directory_and_clashes_get_numbers(store, tmp_path):
    first = store.add(b"one", name="../../etc/passwd", media_type="text/plain")
    second = store.add(b"two", name="notes.txt", media_type="text/plain")
    third = store.add(b"three", name="NOTES.txt", media_type="text/plain")
    messages = [user(first, second), text_message("assistant", "ok"), user(third, second)]
    assert attachment_paths(messages) == {
        first["sha256"]: "attachments/passwd",
        second["sha256"]: "attachments/notes.txt",
        third["sha256"]: "attachments/NOTES-2.txt",
    }
    assert safe_file_name(".hidden") == "hidden" and safe_file_name("a\x00b/..") == "file"
    written = write_attachments(messages, tmp_path)
    assert (tmp_path / "attachments" / "NOTES-2.txt").read_bytes() == b"three"
    assert sorted(p.name for p in (tmp_path / "attachments").iterdir()) == ["NOTES-2.txt", "notes.txt", "passwd"]
    assert len(written) == 3


def test_claude_code_finds_the_files_in_its_working_directory_named_in_the_prompt(store, anthropic_fake, tmp_path):
    report = store.add(pdf(2), name="report.pdf", media_type="application/pdf")
    anthropic_fake.push(Turn([Text("I see report.pdf.")]))
    home = tmp_path / "cc"
    request = ChatRequest(
        provider="claude_code",
        model="claude-sonnet-4-5",
        messages=[user(text_block("summarize the attached report"), report)],
        runtime=RuntimeRun(home=home),
    )
    result = ChatUnifier().chat(request)
    assert result.stop_reason == "end_turn"
    assert (home / "cwd" / "attachments" / "report.pdf").read_bytes() == pdf(2)
    sent = _prompt_texts(anthropic_fake.requests[-1].body)
    assert "summarize the attached report" in sent
    assert json.dumps(f"[file {describe(report)} at attachments/report.pdf]")[1:-1] in sent


def test_codex_gets_the_files_of_the_whole_conversation_named_in_its_prompt(store, openai_fake, monkeypatch):
    image = store.add(png(), name="shot.png", media_type="image/png")
    table = store.add(CSV, name="table.csv", media_type="text/csv")
    openai_fake.push(Turn([Text("Two rows.")]))
    messages = [user(text_block("look"), image), text_message("assistant", "A red square."), user(table)]
    request = ChatRequest(provider="codex_cli", model="gpt-5", messages=messages)
    result = ChatUnifier().chat(request)
    assert result.stop_reason == "end_turn"
    sent = _prompt_texts(openai_fake.requests[-1].body)
    assert json.dumps(f"[user attached] [file {describe(image)} at attachments/shot.png]")[1:-1] in sent
    assert json.dumps(f"- [file {describe(table)} at attachments/table.csv]")[1:-1] in sent


@pytest.mark.slow
def test_rlm_code_reads_an_attached_file_at_its_path(store, tmp_path, monkeypatch):
    table = store.add(CSV, name="table.csv", media_type="text/csv")
    with FakeChatCompletions() as backend:
        monkeypatch.setenv("OPENAI_COMPATIBLE_BASE_URL", backend.base_url)
        monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", "sk-rlm-backend-key")
        code = (
            "import re\n"
            "path = re.search(r'at (/\\S+table\\.csv)', context).group(1)\n"
            "print('ROWS', open(path).read().count(chr(10)))\n"
            "answer['content'] = open(path).read().splitlines()[1]\n"
            "answer['ready'] = True"
        )
        backend.push(Turn([Text(f"Reading it.\n```repl\n{code}\n```")]))
        request = ChatRequest(
            provider="rlm",
            model="local-model",
            messages=[user(text_block("what is the first row?"), table)],
            runtime=RuntimeRun(home=tmp_path / "rlm", params={"backend": "openai_compatible"}),
        )
        result = ChatUnifier().chat(request)
    assert result.message["blocks"][-1]["text"] == "alice,3"
    assert "table.csv" in json.dumps(backend.requests[0].body)


def test_vertex_gets_the_files_as_image_and_document_input(store, vertex_fake, tmp_path):
    image = store.add(png(), name="shot.png", media_type="image/png")
    report = store.add(pdf(1), name="report.pdf", media_type="application/pdf")
    notes = store.add(b"buy milk", name="notes.md", media_type="text/markdown")
    vertex_fake.push(Turn([Text("Got them.")]))
    params = {"project": "P", "location": "L", "agent": "antigravity-preview-05-2026"}
    request = ChatRequest(
        provider="vertex_agent",
        model="gemini-3-flash",
        messages=[user(text_block("look"), image, report, notes)],
        runtime=RuntimeRun(home=tmp_path, params=params),
    )
    ChatUnifier().chat(request)
    [create] = vertex_fake.creates()
    # The SDK sends a content list as one user_input step holding it.
    [step] = create.body["input"]
    assert step["type"] == "user_input"
    assert step["content"] == [
        {"type": "text", "text": "look"},
        {"type": "image", "data": base64.b64encode(png()).decode(), "mime_type": "image/png"},
        {"type": "document", "data": base64.b64encode(pdf(1)).decode(), "mime_type": "application/pdf"},
        {"type": "text", "text": '[file "notes.md"]\nbuy milk\n[end of file "notes.md"]'},
    ]


def test_vertex_fake_refuses_plain_text_as_a_document(vertex_fake, tmp_path):
    from providers.runtimes.vertex_agent.client import make_client
    from providers.runtimes.vertex_agent.params import VertexParams

    params = VertexParams.of({"project": "P", "location": "L", "agent": "antigravity-preview-05-2026"})
    request = ChatRequest(provider="vertex_agent", model="gemini-3-flash", messages=[])
    client = make_client(request, params, wall_seconds=30)
    wrong = [{"type": "document", "data": base64.b64encode(b"hi").decode(), "mime_type": "text/plain"}]
    with pytest.raises(Exception):  # noqa: B017 - the SDK's error class for a 400 differs by endpoint
        client.interactions.create(agent=params.agent, input=wrong, environment="remote", stream=False)
    assert "text/plain is not a supported document type" in vertex_fake.rejections[-1].message
