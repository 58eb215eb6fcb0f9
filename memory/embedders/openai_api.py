"""OpenAI embeddings through the openai SDK; OPENAI_BASE_URL points it at any compatible server."""

from __future__ import annotations

import os

from .base import Embedder, EmbedderError

# Models whose size is known without asking the provider; others need MEMORY_OPENAI_EMBEDDING_DIMS.
KNOWN_DIMS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072, "text-embedding-ada-002": 1536}


class OpenAIEmbedder(Embedder):
    name = "openai"
    billing_provider = "openai"

    def __init__(self, *, model: str, dims: int | None, timeout_s: float):
        self.api_model = model
        self.billing_model = model
        self.requested_dims = dims
        self.dims = dims or KNOWN_DIMS.get(model, 0)
        if not self.dims:
            raise EmbedderError(f"set MEMORY_OPENAI_EMBEDDING_DIMS for the model {model!r}")
        # A shortened text-embedding-3 vector is another vector space: the projection key says so.
        self.model = f"openai:{model}" + (f"@{dims}" if dims and dims != KNOWN_DIMS.get(model) else "")
        self.timeout_s = timeout_s

    def _client(self):
        import openai

        # Read at call time so a rotated key or a test server takes effect without a restart.
        return openai.OpenAI(
            api_key=os.environ.get("OPENAI_API_KEY") or "missing-key",
            base_url=os.environ.get("OPENAI_BASE_URL") or None,
            timeout=self.timeout_s,
            max_retries=1,
        )

    def embed(self, texts: list[str]) -> list[list[float]]:
        return self.embed_measured(texts)[0]

    def embed_measured(self, texts: list[str]) -> tuple[list[list[float]], int]:
        if not os.environ.get("OPENAI_API_KEY") and not os.environ.get("OPENAI_BASE_URL"):
            raise EmbedderError("OPENAI_API_KEY is not set")
        kwargs = {"model": self.api_model, "input": texts}
        if self.requested_dims and self.requested_dims != KNOWN_DIMS.get(self.api_model):
            kwargs["dimensions"] = self.requested_dims
        try:
            response = self._client().embeddings.create(**kwargs)
        except Exception as exc:  # the SDK raises many types; all mean "no vectors this time"
            raise EmbedderError(f"openai embeddings failed: {type(exc).__name__}") from exc
        vectors = [row.embedding for row in sorted(response.data, key=lambda row: row.index)]
        if len(vectors) != len(texts) or any(len(v) != self.dims for v in vectors):
            raise EmbedderError("openai embeddings returned an unexpected shape")
        usage = getattr(response, "usage", None)
        return vectors, int(getattr(usage, "prompt_tokens", 0) or 0)
