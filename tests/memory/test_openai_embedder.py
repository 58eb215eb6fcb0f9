"""The OpenAI embedder against a local HTTP server speaking the embeddings endpoint (no SDK mocks)."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from memory.embedders import EmbedderError
from memory.embedders.openai_api import OpenAIEmbedder


@pytest.fixture
def embeddings_server(monkeypatch):
    requests, state = [], {"status": 200}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
            if state["status"] != 200:
                payload = {"error": {"message": "overloaded", "type": "server_error"}}
            else:
                dims = body.get("dimensions", 1536)
                data = [
                    {"object": "embedding", "index": i, "embedding": [float(i + 1)] + [0.0] * (dims - 1)}
                    for i, _ in enumerate(body["input"])
                ]
                payload = {
                    "object": "list",
                    "data": list(reversed(data)),
                    "model": body["model"],
                    "usage": {"prompt_tokens": 1, "total_tokens": 1},
                }
            raw = json.dumps(payload).encode()
            self.send_response(state["status"])
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{server.server_port}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    yield requests, state
    server.shutdown()


def test_embeds_through_the_configured_base_url_in_input_order(embeddings_server):
    requests, _ = embeddings_server
    embedder = OpenAIEmbedder(model="text-embedding-3-small", dims=None, timeout_s=5)
    assert embedder.model == "openai:text-embedding-3-small" and embedder.dims == 1536
    vectors = embedder.embed(["a", "b"])
    assert [v[0] for v in vectors] == [1.0, 2.0] and len(vectors[0]) == 1536
    assert requests[0]["path"] == "/v1/embeddings" and requests[0]["auth"] == "Bearer test-key"
    assert requests[0]["body"]["model"] == "text-embedding-3-small" and "dimensions" not in requests[0]["body"]


def test_shortened_vectors_are_their_own_projection(embeddings_server):
    requests, _ = embeddings_server
    embedder = OpenAIEmbedder(model="text-embedding-3-small", dims=256, timeout_s=5)
    assert embedder.model == "openai:text-embedding-3-small@256"
    assert len(embedder.embed(["a"])[0]) == 256 and requests[0]["body"]["dimensions"] == 256


def test_a_provider_error_is_an_embedder_error(embeddings_server):
    _, state = embeddings_server
    state["status"] = 500
    with pytest.raises(EmbedderError):
        OpenAIEmbedder(model="text-embedding-3-small", dims=None, timeout_s=5).embed(["a"])


def test_an_unknown_model_needs_its_dimension():
    with pytest.raises(EmbedderError):
        OpenAIEmbedder(model="some-other-model", dims=None, timeout_s=5)
