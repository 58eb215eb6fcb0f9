"""Embedders behind one interface. Vectors are an accelerator: every caller copes with `EmbedderError`.

`settings.MEMORY_EMBEDDER` picks one: `minilm` (default: all-MiniLM-L6-v2 int8 on ONNX Runtime, installed with the
project), `none` (full-text search only), `openai`, `local` (the full-precision model on torch, an optional extra),
or a dotted path `package.module:ClassName` (tests use this for a deterministic or failing embedder). Switching
embedder is a `manage.py memory_reindex`, not a migration: projections are keyed by `Embedder.model`.
"""

from __future__ import annotations

import importlib
import threading

from django.conf import settings

from .base import Embedder, EmbedderError

__all__ = ["Embedder", "EmbedderError", "embedding_text", "get_embedder"]


class NoneEmbedder(Embedder):
    name = "none"
    model = ""
    dims = 0
    enabled = False

    def embed(self, texts: list[str]) -> list[list[float]]:
        raise EmbedderError("no embedder is configured")


_cache: dict[tuple, Embedder] = {}
_lock = threading.Lock()


def _build(name: str) -> Embedder:
    if name == "none":
        return NoneEmbedder()
    if name == "openai":
        from .openai_api import OpenAIEmbedder

        return OpenAIEmbedder(
            model=settings.MEMORY_OPENAI_EMBEDDING_MODEL,
            dims=settings.MEMORY_OPENAI_EMBEDDING_DIMS,
            timeout_s=settings.MEMORY_EMBED_TIMEOUT_S,
        )
    if name == "minilm":
        from .minilm_onnx import MiniLMOnnxEmbedder

        return MiniLMOnnxEmbedder()
    if name == "local":
        from .local import LocalMiniLMEmbedder

        return LocalMiniLMEmbedder()
    if ":" in name:
        module_name, _, class_name = name.partition(":")
        return getattr(importlib.import_module(module_name), class_name)()
    raise EmbedderError(f"unknown MEMORY_EMBEDDER {name!r}")


def get_embedder(name: str | None = None) -> Embedder:
    """The configured embedder (one instance per configuration: the local model loads once per process)."""
    name = name or settings.MEMORY_EMBEDDER
    key = (name, settings.MEMORY_OPENAI_EMBEDDING_MODEL, settings.MEMORY_OPENAI_EMBEDDING_DIMS)
    with _lock:
        if key not in _cache:
            _cache[key] = _build(name)
        return _cache[key]


def embedding_text(*, title: str, content: str) -> str:
    return f"{title}\n{content}" if title else content
