"""The Context panel page and its REST handlers (docs/invariants.md#panel-live-only): live generation only, narrowed
to the agent a Context node serves, every block type rendered, HTML escaped, Clear, owner scope."""

import json

import pytest
from django.test import Client
from django.urls import reverse

from conversations.models import AgentConversation
from conversations.services import UsageEntry, usage_record_append
from conversations.store import conversation_key, conversation_pressure_record, load_conversation, save_conversation
from tests.conversations.factories import assistant, result, started_workflow, system, turn, user

pytestmark = pytest.mark.django_db

SCRIPT = "<script>alert('owned')</script>"


def _every_block_type() -> list[dict]:
    return [
        system("be careful"),
        user(f"hello {SCRIPT}"),
        {
            "role": "assistant",
            "blocks": [
                {"type": "thinking", "text": "pondering", "signature": "sig==", "provider": "anthropic"},
                {"type": "redacted_thinking", "data": "opaque"},
                {"type": "text", "text": f"I will look {SCRIPT}"},
                {
                    "type": "tool_call",
                    "id": "c1",
                    "name": "memory",
                    "arguments_raw": '{"operation": "list"}',
                    "arguments": {"operation": "list"},
                },
                {
                    "type": "tool_call",
                    "id": "c2",
                    "name": "memory",
                    "arguments_raw": "{not json",
                    "arguments": None,
                    "parse_error": "invalid JSON",
                },
                {"type": "image", "ref": "blob:abc"},
                {"type": "hologram", "payload": {"x": SCRIPT}},
            ],
        },  # fmt: skip
        result("c1", f"listed {SCRIPT}"),
        result("c2", "bad arguments", is_error=True),
        {"role": "assistant", "blocks": [{"type": "text", "text": "partial", "stopped": True}]},
    ]


@pytest.fixture
def live(owner):
    workflow = started_workflow(owner, agents=2, generation=2)
    agent1, agent2 = f"{workflow.pk}:agent:1", f"{workflow.pk}:agent:2"
    save_conversation(conversation_key(workflow.pk, 2, agent1), _every_block_type())
    save_conversation(conversation_key(workflow.pk, 2, agent2), [user("agent two's question"), assistant("two")])
    save_conversation(conversation_key(workflow.pk, 1, agent1), [user("an old generation's words")])
    return workflow


@pytest.fixture
def browser(owner):
    client = Client()
    client.force_login(owner)
    return client


def _panel(workflow, **params):
    return reverse("conversations:context-panel", args=[workflow.pk]), params


def test_the_panel_renders_every_block_type_and_escapes_html(live, browser):
    url, _ = _panel(live)
    page = browser.get(url, {"node": f"{live.pk}:context:1"})
    assert page.status_code == 200
    html = page.content.decode()
    assert SCRIPT not in html
    assert "&lt;script&gt;alert(&#x27;owned&#x27;)&lt;/script&gt;" in html
    for marker in ("role-system", "role-user", "role-assistant", "role-tool"):
        assert marker in html
    assert "<details><summary>Thinking" in html and "pondering" in html
    assert "(thinking the provider keeps private)" in html
    assert "Called <code>memory</code>" in html and "malformed arguments" in html and "{not json" in html
    assert "Result of <code>memory</code>" in html and "(failed)" in html
    assert "(an image)" in html
    assert "Other content <code>hologram</code>" in html
    assert "(stopped)" in html
    # narrowed to the agent this Context serves, live generation only
    assert "agent two&#x27;s question" not in html and "agent two's question" not in html
    assert "an old generation" not in html


def test_the_raw_tab_shows_the_stored_wires_escaped(live, browser):
    url, _ = _panel(live)
    html = browser.get(url, {"node": f"{live.pk}:context:1", "tab": "raw"}).content.decode()
    assert SCRIPT not in html
    assert "&quot;tool_call_id&quot;: &quot;c1&quot;" in html and "&quot;ts&quot;" in html


def test_the_panel_picks_the_node_and_shows_usage_and_pressure(live, browser):
    key = conversation_key(live.pk, 2, f"{live.pk}:agent:2")
    conversation_pressure_record(key, input_tokens=6000, output_headroom_tokens=2000, context_window_tokens=10_000)
    usage_record_append(entry=UsageEntry(idempotency_key="u1", kind="llm", provider="offline", model="m", outcome="ok",
                                         workflow_id=live.pk, generation=2, agent_node_id=key.agent_node_id,
                                         input_tokens=123, output_tokens=45))  # fmt: skip
    url, _ = _panel(live)
    html = browser.get(url, {"node": f"{live.pk}:context:2"}).content.decode()
    assert "agent two&#x27;s question" in html
    assert 'value="80"' in html
    # The gauge in plain words: the share of the model's window, the conversation, the room kept for the answer.
    assert "80 % of the model&#x27;s 10k window: the conversation is 6,000 tokens" in html
    assert "plus up to 2,000 tokens kept free for the answer" in html
    assert "123 / 45" in html
    assert "output headroom" not in html and "retained input" not in html


def test_clear_empties_that_agents_conversation_only(live, browser):
    url = reverse("conversations:context-panel-clear", args=[live.pk])
    response = browser.post(url, {"node": f"{live.pk}:context:1"})
    assert response.status_code == 302
    assert load_conversation(conversation_key(live.pk, 2, f"{live.pk}:agent:1")) == []
    assert len(load_conversation(conversation_key(live.pk, 2, f"{live.pk}:agent:2"))) == 2
    assert len(load_conversation(conversation_key(live.pk, 1, f"{live.pk}:agent:1"))) == 1
    page = browser.get(response["Location"]).content.decode()
    assert "Nothing kept yet" in page and "Context cleared." in page


def test_clear_needs_post_and_csrf(live, owner):
    url = reverse("conversations:context-panel-clear", args=[live.pk])
    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)
    assert client.get(url).status_code == 405
    assert client.post(url, {"node": f"{live.pk}:context:1"}).status_code == 403
    assert AgentConversation.objects.filter(workflow=live, generation=2).count() == 2
    page = client.get(reverse("conversations:context-panel", args=[live.pk])).content.decode()
    assert "csrfmiddlewaretoken" in page and 'data-confirm-title="Clear this agent' in page


def test_another_owner_gets_404_everywhere(live, other_owner):
    client = Client()
    client.force_login(other_owner)
    assert client.get(reverse("conversations:context-panel", args=[live.pk])).status_code == 404
    assert client.post(reverse("conversations:context-panel-clear", args=[live.pk]), {"node": "x"}).status_code == 404
    assert AgentConversation.objects.filter(workflow=live).count() == 3


def test_an_unstarted_workflow_and_an_unknown_node(owner, browser):
    workflow = started_workflow(owner, generation=0)
    html = browser.get(reverse("conversations:context-panel", args=[workflow.pk])).content.decode()
    assert "has not been started" in html
    live = started_workflow(owner)
    assert browser.get(reverse("conversations:context-panel", args=[live.pk]), {"node": "nope"}).status_code == 404


# --- REST ------------------------------------------------------------------------------------------------------


def test_rest_list_is_metadata_only(live, owner_client):
    response = owner_client.get(f"/api/workflows/{live.pk}/conversations/")
    assert response.status_code == 200
    body = response.json()
    assert body["count"] == 3
    rows = {(r["generation"], r["agent_node_id"]): r for r in body["results"]}
    assert rows[(2, f"{live.pk}:agent:1")]["message_count"] == 6 and rows[(2, f"{live.pk}:agent:1")]["live"]
    assert not rows[(1, f"{live.pk}:agent:1")]["live"]
    assert "hello" not in json.dumps(body)


def test_rest_detail_is_the_live_generation_paginated(live, owner_client):
    agent = f"{live.pk}:agent:1"
    first = owner_client.get(f"/api/workflows/{live.pk}/conversations/{agent}/", {"limit": 4}).json()
    assert (first["generation"], first["message_count"], first["next_offset"]) == (2, 6, 4)
    assert [m["role"] for m in first["messages"]] == ["system", "user", "assistant", "tool"]
    rest = owner_client.get(f"/api/workflows/{live.pk}/conversations/{agent}/", {"offset": 4, "limit": 4}).json()
    assert len(rest["messages"]) == 2 and rest["next_offset"] is None
    assert owner_client.get(f"/api/workflows/{live.pk}/conversations/{agent}/", {"limit": 0}).status_code == 400


def test_rest_delete_clears_the_live_row(live, owner_client):
    agent = f"{live.pk}:agent:1"
    assert owner_client.delete(f"/api/workflows/{live.pk}/conversations/{agent}/").json() == {"deleted": 1}
    assert owner_client.get(f"/api/workflows/{live.pk}/conversations/{agent}/").json()["messages"] == []
    assert owner_client.delete(f"/api/workflows/{live.pk}/conversations/{agent}/").json() == {"deleted": 0}


def test_rest_is_owner_scoped(live, other_client, api_client):
    agent = f"{live.pk}:agent:1"
    for path in (f"/api/workflows/{live.pk}/conversations/", f"/api/workflows/{live.pk}/conversations/{agent}/"):
        assert other_client.get(path).status_code == 404
        assert api_client.get(path).status_code in (401, 403)
    assert other_client.delete(f"/api/workflows/{live.pk}/conversations/{agent}/").status_code == 404
    assert AgentConversation.objects.filter(workflow=live).count() == 3


def test_the_schema_documents_the_handlers(owner_client):
    schema = owner_client.get("/api/schema/", {"format": "json"}).json()
    assert "/api/workflows/{workflow_id}/conversations/" in schema["paths"]
    detail = schema["paths"]["/api/workflows/{workflow_id}/conversations/{agent_node_id}/"]
    assert {"get", "delete"} <= set(detail)


def test_the_list_page_has_no_n_plus_one(live, browser, django_assert_max_num_queries):
    for n in range(3, 30):
        save_conversation(conversation_key(live.pk, 2, f"{live.pk}:agent:1"), [*_every_block_type(), *turn(n)])
    url, _ = _panel(live)
    with django_assert_max_num_queries(13):  # one of them: the compaction slot
        assert browser.get(url, {"node": f"{live.pk}:context:1"}).status_code == 200


@pytest.mark.parametrize(
    ("provider", "model", "label"),
    [
        ("claude_code", "claude-sonnet-4-5", "Exact observable stream plus explicit session binding"),
        ("codex_cli", "gpt-5", "Observable-only, non-resumable"),
        ("offline", "offline-echo", "Provider-replayable (the built-in offline provider keeps no state)"),
    ],
)
def test_the_panel_says_what_each_agents_conversation_keeps(owner, browser, provider, model, label):
    from providers.runtimes import fidelity_of
    from tests.agents.factories import assistant_with

    workflow, _, _ = assistant_with(owner, provider=provider, model=model)
    html = browser.get(reverse("conversations:context-panel", args=[workflow.pk])).content.decode()
    assert f"What is kept:</span> <strong>{label}</strong>" in html
    detail = fidelity_of(provider)["detail"]
    assert (detail.replace("'", "&#x27;") in html) if detail else True
    assert "Bound to a Claude Code session" not in html  # nothing bound yet: nothing implies hidden state


def test_the_panel_says_when_a_claude_code_session_is_bound(owner, browser):
    from conversations.models import RuntimeSessionBinding
    from tests.agents.factories import assistant_with

    workflow, generation, ids = assistant_with(owner, provider="claude_code", model="claude-sonnet-4-5")
    RuntimeSessionBinding.objects.create(
        workflow=workflow,
        generation=generation,
        agent_node_id=ids["lead"],
        runtime="claude_code",
        session_id="2b8e4c1a-0000-4000-8000-000000000001",
        transcript_path="/tmp/x.jsonl",
        cursor_length=3,
        cursor_digest="d" * 64,
    )
    html = browser.get(reverse("conversations:context-panel", args=[workflow.pk])).content.decode()
    assert "Bound to a Claude Code session" in html
    assert "2b8e4c1a" not in html  # the session id is the runtime's, not the owner's business


def test_the_panel_shows_what_the_provider_adapter_said_about_a_message(owner, browser):
    # The adapters put plain-words notes on an answer (providers/README.md): reasoning summaries off for an
    # unverified OpenAI organisation, a refusal, a blocked prompt, reasoning dropped after a model change.
    workflow = started_workflow(owner, agents=1, generation=1)
    note = f"Reasoning summaries are off for this OpenAI key {SCRIPT}"
    answer = {"role": "assistant", "blocks": [{"type": "text", "text": "Green."}], "meta": {"notes": [note]}}
    save_conversation(conversation_key(workflow.pk, 1, f"{workflow.pk}:agent:1"), [user("tea?"), answer])
    url, _ = _panel(workflow)
    html = browser.get(url, {"node": f"{workflow.pk}:context:1"}).content.decode()
    assert '<p class="meta ctx-note">Reasoning summaries are off for this OpenAI key &lt;script&gt;' in html


def test_rest_detail_of_a_node_not_in_this_workflow_is_404(live, owner, owner_client):
    """Another workflow's agent (same owner) or a made-up node id: 404, never an empty conversation or a count."""
    elsewhere = started_workflow(owner, name="other")
    foreign = f"{elsewhere.pk}:agent:1"
    for node in (foreign, "nope"):
        path = f"/api/workflows/{live.pk}/conversations/{node}/"
        for response in (owner_client.get(path), owner_client.delete(path)):
            assert response.status_code == 404 and response.json()["code"] == "not_found"
    assert owner_client.get(f"/api/workflows/{elsewhere.pk}/conversations/{foreign}/").status_code == 200
    assert AgentConversation.objects.filter(workflow=live).count() == 3


def test_the_panel_shows_a_compaction_in_progress_when_the_last_landed_and_summaries_paid_for(live, browser):
    from conversations.store import PrefixIdentity, compaction_claim, compaction_finish, compaction_ready

    key = conversation_key(live.pk, 2, f"{live.pk}:agent:2")
    url, _ = _panel(live)
    html = browser.get(url, {"node": f"{live.pk}:context:2"}).content.decode()
    assert "No summary has replaced older turns yet." in html and "ctx-compaction-running" not in html
    assert "Summaries paid for: 0 (0 used, 0 discarded" in html

    assert compaction_claim(key)
    compaction_finish(key, outcome="landed", paid=True)
    assert compaction_claim(key)
    compaction_ready(key, identity=PrefixIdentity(1, 1, "00"), summary="s")  # paid, waiting to land
    html = browser.get(url, {"node": f"{live.pk}:context:2"}).content.decode()
    assert "A summary of the older turns is being made" in html
    assert "Last summary landed" in html and "ago." in html
    assert "Summaries paid for: 2 (1 used, 0 discarded" in html
    compaction_finish(key, outcome="discarded", paid=False)
    html = browser.get(url, {"node": f"{live.pk}:context:2"}).content.decode()
    assert "ctx-compaction-running" not in html
    assert "Summaries paid for: 2 (1 used, 1 discarded" in html
