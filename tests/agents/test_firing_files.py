"""A firing whose stored conversation holds attached files: the provider gets them in its documented form, the
step's request view lists them (never their bytes), and a file the provider's limits refuse in an earlier turn goes
as its text, so the conversation stays answerable."""

from __future__ import annotations

import json

import pytest

from agents.models import Firing, LlmStep
from agents.services.firings import firing_start
from conversations.store import conversation_key, forget_process_copies, load_conversation, save_conversation
from tests.agents.factories import assistant_with
from tests.fakes import Text, Turn
from tests.file_samples import pdf, registered_store

pytestmark = pytest.mark.django_db(transaction=True)


def _fire_with_history(owner, anthropic_fake, document: bytes, name: str) -> tuple[Firing, dict, list[dict]]:
    workflow, generation, ids = assistant_with(owner, provider="anthropic", model="claude-sonnet-4-5")
    key = conversation_key(workflow.pk, generation, ids["lead"])
    with registered_store() as store:
        block = store.add(document, name=name, media_type="application/pdf")
        save_conversation(
            key,
            [
                {"role": "system", "blocks": [{"type": "text", "text": "You are Lead."}]},
                {"role": "user", "blocks": [{"type": "text", "text": "here is the invoice"}, block]},
                {"role": "assistant", "blocks": [{"type": "text", "text": "Got it."}]},
            ],
        )
        forget_process_copies()
        anthropic_fake.push(Turn([Text("17 EUR.")]))
        firing = Firing.objects.get(
            pk=firing_start(workflow=workflow, generation=generation, agent_node_id=ids["lead"], prompt="the total?")
        )
    return firing, block, load_conversation(key)


def test_a_stored_file_goes_to_the_provider_and_the_request_view_names_it(owner, anthropic_fake, inline):
    firing, block, stored = _fire_with_history(owner, anthropic_fake, pdf(2), "invoice.pdf")
    assert firing.state == Firing.State.FINISHED, (firing.error_code, firing.error_message)
    sent = anthropic_fake.last_body["messages"][0]["content"]
    assert sent[1]["type"] == "document" and sent[1]["title"] == "invoice.pdf"
    step = LlmStep.objects.get(firing=firing)
    assert step.request_info["attachments"] == [
        {"name": "invoice.pdf", "media_type": "application/pdf", "size": len(pdf(2))}
    ]
    assert stored[1]["blocks"][1] == block  # the stored conversation keeps the reference, not the bytes
    assert "base64" not in json.dumps(stored)


def test_an_earlier_file_over_the_providers_limit_goes_as_text_and_the_turn_is_answered(owner, anthropic_fake, inline):
    firing, _block, _stored = _fire_with_history(owner, anthropic_fake, pdf(101), "minutes.pdf")
    assert firing.state == Firing.State.FINISHED, (firing.error_code, firing.error_message)
    sent = anthropic_fake.last_body["messages"][0]["content"]
    assert sent[1]["type"] == "text" and "it has 101 pages and Anthropic takes at most 100" in sent[1]["text"]
    assert not anthropic_fake.rejections
