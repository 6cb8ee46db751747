"""mem0ai 2.1.x, imported lazily and bound to stand-ins for everything it would persist.

`Memory.__init__` is never called (it would build qdrant at /tmp/qdrant, sqlite at
~/.mem0/history.db and, with telemetry on, PostHog); `TurnMemory` sets the attributes it would
set, including `_entity_store` (left None, mem0 would build a qdrant store on first use). The
stand-ins: `NoHistory` (remembers nothing), `TurnStore` (one call's vector store: the recalled
facts shown to mem0, then what it inserts), `FlatEmbedding` (one constant unit vector: mem0
needs vectors, not their meaning) and `ChatLLM` (the one chat call, through a function the
caller gives).

mem0 is imported once per process, in the caller's thread, with `MEM0_TELEMETRY=False` (read at
import time) and `MEM0_DIR` pointing at a throwaway directory (the import writes `config.json`
with an anonymous id there; the directory is removed at exit). mem0's spaCy loader is marked as
failed, so neither lemmatisation nor entity linking runs (without that, an installed spaCy
lacking its model would make mem0 try to *download* en_core_web_sm at run time). mem0's logger
is set to CRITICAL: its warnings and debug lines may quote memory texts.
"""

from __future__ import annotations

import atexit
import hashlib
import importlib
import json
import logging
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from memory_server.memory.errors import Unavailable
from memory_server.openai_http import EndpointError

MEM0_SERIES = "2.1."  # the internals this adapter relies on are those of mem0ai 2.1.x

# The chat call mem0 makes: (messages, json_mode) -> the reply's text. Runs in mem0's thread.
Ask = Callable[[list[dict[str, str]], bool], str]


@dataclass(slots=True)
class _Row:
    """What mem0 expects from a vector store hit (`id`, `score`, `payload`)."""

    id: str
    score: float
    payload: dict[str, Any] = field(default_factory=dict)


class NoHistory:
    """Duck-types mem0's `SQLiteManager` (mem0/memory/storage.py): remembers nothing."""

    def add_history(self, *args: Any, **kwargs: Any) -> None:
        pass

    def batch_add_history(self, records: Any) -> None:
        pass

    def get_history(self, memory_id: str) -> list[dict[str, Any]]:
        return []

    def save_messages(self, messages: Any, session_scope: str) -> None:
        pass

    def get_last_messages(self, session_scope: str, limit: int = 10) -> list[dict[str, Any]]:
        return []

    def reset(self) -> None:
        pass

    def close(self) -> None:
        pass


@dataclass(frozen=True, slots=True)
class Mem0Classes:
    """mem0's classes, bound once after the lazy import."""

    version: str
    memory_class: Any
    store_class: Any
    llm_class: Any
    embedding_class: Any
    config: Any


_LOAD_LOCK = threading.Lock()
_LOADED: Mem0Classes | Unavailable | None = None


def mem0_loaded() -> bool:
    """Whether mem0 is imported and bound already (`load_mem0` then returns at once)."""
    return isinstance(_LOADED, Mem0Classes)


def load_mem0() -> Mem0Classes:
    """Import mem0 once per process (in the caller's thread: it takes about a second). Not
    installed, or another series: Unavailable, every time."""
    global _LOADED
    with _LOAD_LOCK:
        if _LOADED is None:
            try:
                _LOADED = _import_mem0()
            except Unavailable as exc:
                _LOADED = exc
        if isinstance(_LOADED, Unavailable):
            raise Unavailable(str(_LOADED))
        return _LOADED


def _import_mem0() -> Mem0Classes:
    if sys.modules.get("mem0") is None:
        os.environ["MEM0_TELEMETRY"] = "False"  # read once, at import time
        scratch = tempfile.mkdtemp(prefix="mem0-")
        atexit.register(shutil.rmtree, scratch, ignore_errors=True)
        previous = os.environ.get("MEM0_DIR")
        os.environ["MEM0_DIR"] = scratch
        try:
            mem0 = importlib.import_module("mem0")
        except ImportError:
            raise Unavailable(
                "mem0ai is not installed (pip install 'graphrag-memory[mem0]')"
            ) from None
        finally:
            if previous is None:
                os.environ.pop("MEM0_DIR", None)
            else:
                os.environ["MEM0_DIR"] = previous
    else:
        mem0 = sys.modules["mem0"]
    version = str(getattr(mem0, "__version__", "?"))
    if not version.startswith(MEM0_SERIES):
        raise Unavailable(f"mem0ai {version} is installed; this adapter needs {MEM0_SERIES}x")
    main = importlib.import_module("mem0.memory.main")
    telemetry = importlib.import_module("mem0.memory.telemetry")
    # Belt and braces, for a process that imported mem0 before us: capture_event and the
    # notices read these module globals on every call.
    setattr(telemetry, "MEM0_TELEMETRY", False)  # noqa: B010
    setattr(main, "MEM0_TELEMETRY", False)  # noqa: B010
    spacy_models = importlib.import_module("mem0.utils.spacy_models")
    setattr(spacy_models, "_load_failed_full", True)  # noqa: B010 (no entities, no download)
    setattr(spacy_models, "_load_failed_lemma", True)  # noqa: B010 (BM25 lemmas: unused here)
    logging.getLogger("mem0").setLevel(logging.CRITICAL)
    return _bind(version, main)


def _bind(version: str, main: Any) -> Mem0Classes:
    """mem0's classes for one turn, built on mem0's own bases (imported only now)."""
    store_class = _turn_store(importlib.import_module("mem0.vector_stores.base").VectorStoreBase)
    return Mem0Classes(
        version=version,
        memory_class=_turn_memory(main.Memory, store_class),
        store_class=store_class,
        llm_class=_chat_llm(
            importlib.import_module("mem0.llms.base").LLMBase,
            importlib.import_module("mem0.memory.utils"),
        ),
        embedding_class=_flat_embedding(
            importlib.import_module("mem0.embeddings.base").EmbeddingBase
        ),
        config=importlib.import_module("mem0.configs.base").MemoryConfig(),
    )


def _flat_embedding(embedding_base: Any) -> type:
    class FlatEmbedding(embedding_base):  # type: ignore[misc]
        """One constant unit vector for every text: mem0 needs vectors, not their meaning."""

        def __init__(self, dims: int) -> None:
            super().__init__()
            self.config.embedding_dims = dims
            self._vector = [1.0 / dims**0.5] * dims

        def embed(self, text: Any, memory_action: Any = None) -> list[float]:
            return list(self._vector)

        def embed_batch(self, texts: Any, memory_action: Any = "add") -> list[list[float]]:
            return [list(self._vector) for _ in texts]

    return FlatEmbedding


def _chat_llm(llm_base: Any, utils: Any) -> type:
    class ChatLLM(llm_base):  # type: ignore[misc]
        """mem0's one extraction call, through `ask(messages, json_mode)`; the reply is checked
        here because mem0 would read a broken one as "no memories"."""

        def __init__(self, ask: Ask, model: str, json_mode: bool, max_tokens: int) -> None:
            super().__init__({"model": model, "temperature": 0.0, "max_tokens": max_tokens})
            self._ask = ask
            self._json_mode = json_mode

        def generate_response(
            self,
            messages: list[dict[str, str]],
            tools: Any = None,
            tool_choice: str = "auto",
            **kwargs: Any,
        ) -> str:
            reply = self._ask(
                messages, self._json_mode and kwargs.get("response_format") is not None
            )
            text = utils.remove_code_blocks(reply)
            try:
                parsed = json.loads(text, strict=False)
            except ValueError:
                try:
                    parsed = json.loads(utils.extract_json(text), strict=False)
                except ValueError:
                    raise EndpointError("reply is not JSON") from None
            if not isinstance(parsed, dict) or not isinstance(parsed.get("memory", []), list):
                raise EndpointError('reply is not {"memory": [...]}')
            return reply

    return ChatLLM


def _turn_store(store_base: Any) -> type:
    class TurnStore(store_base):  # type: ignore[misc]
        """The vector store of one `add`: the recalled facts shown to mem0, then what it
        inserts. Dropped with the call."""

        def __init__(self, seeded: Sequence[str]) -> None:
            self.rows: dict[str, _Row] = {}
            self.inserted: list[_Row] = []
            for i, text in enumerate(seeded):
                digest = hashlib.md5(text.encode()).hexdigest()
                score = max(0.0, 1.0 - i / max(1, len(seeded)))
                self.rows[f"r{i}"] = _Row(f"r{i}", score, {"data": text, "hash": digest})

        def create_col(self, name: Any, vector_size: Any, distance: Any) -> None:
            pass

        def insert(self, vectors: Any, payloads: Any = None, ids: Any = None) -> None:
            for i, _ in enumerate(vectors):
                row_id = str(ids[i]) if ids else f"n{len(self.rows)}"
                row = _Row(row_id, 1.0, dict(payloads[i]) if payloads else {})
                self.rows[row_id] = row
                self.inserted.append(row)

        def search(
            self, query: Any, vectors: Any, top_k: int = 5, filters: Any = None
        ) -> list[_Row]:
            return list(self.rows.values())[: max(0, top_k)]

        def delete(self, vector_id: Any) -> None:
            self.rows.pop(str(vector_id), None)

        def update(self, vector_id: Any, vector: Any = None, payload: Any = None) -> None:
            row = self.rows.get(str(vector_id))
            if row is not None and payload is not None:
                row.payload = dict(payload)

        def get(self, vector_id: Any) -> _Row | None:
            return self.rows.get(str(vector_id))

        def list_cols(self) -> list[str]:
            return ["turn"]

        def delete_col(self) -> None:
            self.rows.clear()

        def col_info(self) -> dict[str, Any]:
            return {"name": "turn", "count": len(self.rows)}

        def list(self, filters: Any = None, top_k: int | None = None) -> list[list[_Row]]:
            rows = list(self.rows.values())
            return [rows if top_k is None else rows[:top_k]]

        def reset(self) -> None:
            self.rows.clear()

    return TurnStore


def _turn_memory(memory_base: Any, store_class: type) -> type:
    class TurnMemory(memory_base):  # type: ignore[misc]
        """`Memory` without `Memory.__init__` (see the module doc)."""

        def __init__(
            self, config: Any, llm: Any, embedding: Any, store: Any, instructions: str
        ) -> None:
            self.config = config
            self.embedding_model = embedding
            self.vector_store = store
            self.llm = llm
            self.db = NoHistory()
            self.collection_name = "turn"
            self.api_version = config.version
            self.custom_instructions = instructions
            self.reranker = None
            self._entity_store = store_class(())

    return TurnMemory
