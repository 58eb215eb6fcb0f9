"""The OpenAI embedder through the real SDK against the fake OpenAI server's embeddings endpoint (no SDK mocks)."""

import pytest

from memory.embedders import EmbedderError
from memory.embedders.openai_api import OpenAIEmbedder
from tests.fakes import ErrorReply, FakeOpenAIResponses


@pytest.fixture
def embeddings_server(monkeypatch):
    with FakeOpenAIResponses() as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        yield fake


def test_embeds_through_the_configured_base_url_in_input_order(embeddings_server):
    embeddings_server.embeddings_reversed = True  # the rows come back last input first
    embedder = OpenAIEmbedder(model="text-embedding-3-small", dims=None, timeout_s=5)
    assert embedder.model == "openai:text-embedding-3-small" and embedder.dims == 1536
    vectors = embedder.embed(["a", "b"])
    expected = [FakeOpenAIResponses.embedding_of(text, 1536) for text in ("a", "b")]
    assert [list(v) for v in vectors] == [pytest.approx(e, abs=1e-6) for e in expected]
    (request,) = embeddings_server.requests
    assert request.path == "/v1/embeddings" and request.headers["authorization"] == "Bearer test-key"
    assert request.body["model"] == "text-embedding-3-small" and "dimensions" not in request.body


def test_shortened_vectors_are_their_own_projection(embeddings_server):
    embedder = OpenAIEmbedder(model="text-embedding-3-small", dims=256, timeout_s=5)
    assert embedder.model == "openai:text-embedding-3-small@256"
    assert len(embedder.embed(["a"])[0]) == 256 and embeddings_server.requests[0].body["dimensions"] == 256


def test_a_provider_error_is_an_embedder_error(embeddings_server):
    # The embedder's one retry meets the same error.
    embeddings_server.embedding_errors += [ErrorReply(500, "overloaded", kind="server_error")] * 2
    with pytest.raises(EmbedderError):
        OpenAIEmbedder(model="text-embedding-3-small", dims=None, timeout_s=5).embed(["a"])
    assert len(embeddings_server.requests) == 2


def test_an_unknown_model_needs_its_dimension():
    with pytest.raises(EmbedderError):
        OpenAIEmbedder(model="some-other-model", dims=None, timeout_s=5)
