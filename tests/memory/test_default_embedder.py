"""The embedder a default install gets: real vectors from files on disk, and hybrid recall without any setting."""

import math
import socket

import pytest
from django.conf import settings as django_settings

from memory.embedders import get_embedder
from memory.embedders.minilm_onnx import MiniLMOnnxEmbedder
from memory.tasks import embed_item

pytestmark = pytest.mark.django_db


@pytest.fixture
def no_network(monkeypatch):
    """Any connection other than to this machine fails, as a hub download would."""
    real_connect = socket.socket.connect

    def connect(self, address):
        host = address[0] if isinstance(address, tuple) else address
        if isinstance(host, str) and not (host.startswith("127.") or host in ("localhost", "::1")) and "/" not in host:
            raise OSError(f"network is off in this test: {address}")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def _cosine(a, b):
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_the_default_embedder_is_the_bundled_minilm():
    assert django_settings.MEMORY_EMBEDDER == "minilm"
    embedder = get_embedder()
    assert isinstance(embedder, MiniLMOnnxEmbedder)
    assert embedder.enabled and embedder.model == "onnx:all-MiniLM-L6-v2-int8" and embedder.dims == 384


def test_it_makes_real_vectors_offline(no_network):
    embedder = MiniLMOnnxEmbedder()  # a fresh instance: the model loads here, with the network off
    fact, question, unrelated, fact_again = embedder.embed(
        [
            "Dana drinks an espresso with oat milk every morning.",
            "What hot beverage does Dana have at breakfast?",
            "The dog walker comes on Thursdays.",
            "Dana drinks an espresso with oat milk every morning.",
        ]
    )
    assert len(fact) == 384 and abs(math.sqrt(_cosine(fact, fact)) - 1) < 1e-4
    assert fact == pytest.approx(fact_again, abs=1e-5)  # batch position and padding do not change a vector
    # A paraphrase sharing no content word is near; an unrelated sentence is not
    assert _cosine(fact, question) > 0.4 > _cosine(fact, unrelated)
    assert _cosine(fact, question) - _cosine(fact, unrelated) > 0.3


def test_hybrid_is_the_default_path(call):
    # No embedder setting in this test: what a default install does.
    contents = {
        "paraphrase": "Every day at breakfast the owner drinks an espresso with oat milk.",
        "keyword1": "The owner asked for the printer manual.",
        "keyword2": "Owner signed the office lease renewal.",
        "other": "The dog walker comes on Thursdays.",
    }
    ids = {}
    for name, text in contents.items():
        item = call({"operation": "remember", "content": text})["item"]
        assert item["indexing_state"] == "pending"
        ids[name] = item["id"]
    for item_id in ids.values():
        assert embed_item(item_id) == "ready"  # the after-commit task, called directly
    recalled = call({"operation": "recall", "query": "what hot beverage does the owner like in the morning"})
    assert recalled["search"] == "hybrid"
    assert recalled["items"][0]["id"] == ids["paraphrase"], recalled["items"]
    assert recalled["items"][0]["matched_by"] == ["vector"] and recalled["items"][0]["indexing_state"] == "ready"
