"""An embedding backend over any OpenAI-compatible `/embeddings` endpoint (OpenAI, vLLM, Ollama,
llama.cpp server, text-embeddings-inference, ...): `POST {base_url}/embeddings` with
`{"model", "input": [...]}`, vectors read from `data[i].embedding` ordered by `data[i].index`.

The call goes through the shared client (memory_server.openai_http): one budget of `timeout_s`,
retries of what is transient, and its errors: no answer, a timeout, HTTP 408 or 5xx →
Unavailable; HTTP 429 → Overloaded; any other status → EndpointError. A malformed answer is an
EmbeddingError; vectors of the wrong size → DimensionMismatch. No error text, and nothing
logged, ever quotes the input or the endpoint's answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memory_server.embedding.backend import DimensionMismatch, EmbeddingError, l2_normalize
from memory_server.lifecycle import Lifecycle
from memory_server.openai_http import OpenAICompatibleClient

# 32 texts x 3072 dimensions of JSON floats is about 2 MB; a batch of the largest models at
# the largest batch size stays well inside this.
MAX_RESPONSE_BYTES = 256 << 20


class OpenAICompatibleEmbeddings(Lifecycle):
    """An `AsyncEmbeddingBackend` for an OpenAI-compatible embeddings endpoint."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None,
        dimension: int,
        timeout_s: float = 30.0,
    ) -> None:
        if dimension < 1:
            raise ValueError("dimension must be at least 1")
        self._http = OpenAICompatibleClient(
            base_url, api_key, timeout_s, max_response_bytes=MAX_RESPONSE_BYTES
        )
        self._url = self._http.url("embeddings")
        self._model = model
        self._dimension = dimension

    @property
    def model_name(self) -> str:
        return self._model

    @property
    def dimension(self) -> int:
        return self._dimension

    @property
    def url(self) -> str:
        return self._url

    # --- lifecycle --------------------------------------------------------------------------

    async def load(self) -> None:
        """Open the HTTP client (idempotent). The pool calls it before the first batch."""
        await self._http.start()

    async def start(self) -> None:
        """Same as `load`."""
        await self._http.start()

    async def close(self) -> None:
        """Close the HTTP client (idempotent; safe before `start`)."""
        await self._http.close()

    # --- embedding --------------------------------------------------------------------------

    async def embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        """Unit-length vectors for `texts`, in order."""
        if not texts:
            return []
        payload = await self._http.post("embeddings", {"model": self._model, "input": list(texts)})
        return self._vectors(payload, len(texts))

    def _vectors(self, payload: Any, expected: int) -> list[list[float]]:
        try:
            data = payload["data"]
            rows = sorted(((int(d["index"]), d["embedding"]) for d in data), key=lambda r: r[0])
        except (KeyError, TypeError, ValueError) as exc:
            raise EmbeddingError(
                f"the embedding endpoint {self._url} answered without data[].index/embedding"
            ) from exc
        if [index for index, _ in rows] != list(range(expected)):
            raise EmbeddingError(
                f"the embedding endpoint {self._url} answered {len(rows)} vectors "
                f"for {expected} texts"
            )
        vectors: list[list[float]] = []
        for _, embedding in rows:
            if not isinstance(embedding, list) or not all(
                isinstance(x, int | float) and not isinstance(x, bool) for x in embedding
            ):
                raise EmbeddingError(
                    f"the embedding endpoint {self._url} answered a non-float embedding "
                    "(base64 encoding is not supported)"
                )
            if len(embedding) != self._dimension:
                raise DimensionMismatch(self._model, self._dimension, len(embedding))
            vectors.append(l2_normalize(embedding))
        return vectors
