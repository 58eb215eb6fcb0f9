"""The embedder interface, below the package's chooser (`memory.embedders.get_embedder`) and every implementation."""

from __future__ import annotations


class EmbedderError(Exception):
    """The embedder could not produce vectors (missing package, provider error, timeout)."""


class Embedder:
    #: settings name: none | openai | local | a dotted path
    name = "base"
    #: projection key, unique per vector space, e.g. "local:all-MiniLM-L6-v2"
    model = ""
    #: vector dimension, fixed per model
    dims = 0
    enabled = True
    #: who bills each call ("openai"), for the usage ledger; "" for an embedder that runs here and costs nothing
    billing_provider = ""
    #: the model name the provider prices (without the projection key's prefix and size suffix)
    billing_model = ""

    def embed(self, texts: list[str]) -> list[list[float]]:  # pragma: no cover - interface
        raise NotImplementedError

    def embed_measured(self, texts: list[str]) -> tuple[list[list[float]], int]:
        """The vectors and the input tokens the provider billed for them (0 for a local embedder)."""
        return self.embed(texts), 0
