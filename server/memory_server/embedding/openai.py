"""An embedding backend over any OpenAI-compatible `/embeddings` endpoint (OpenAI, vLLM, Ollama,
llama.cpp server, text-embeddings-inference, ...): `POST {base_url}/embeddings` with
`{"model", "input": [...]}`, vectors read from `data[i].embedding` ordered by `data[i].index`.

Errors: no answer, a timeout, HTTP 408 or 5xx → Unavailable; HTTP 429 → Overloaded; any other
status or a malformed answer → EmbeddingError; vectors of the wrong size → DimensionMismatch.
No error text, and nothing logged, ever quotes the input or the endpoint's answer.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from types import TracebackType
from typing import Any

import httpx

from memory_server.embedding.backend import DimensionMismatch, EmbeddingError, l2_normalize
from memory_server.memory.errors import Overloaded, Unavailable

log = logging.getLogger(__name__)


class OpenAICompatibleEmbeddings:
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
        self._url = base_url.rstrip("/") + "/embeddings"
        self._model = model
        self._api_key = api_key
        self._dimension = dimension
        self._timeout_s = timeout_s
        self._client: httpx.AsyncClient | None = None

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
        if self._client is None:
            headers = {"Accept": "application/json"}
            if self._api_key:
                headers["Authorization"] = f"Bearer {self._api_key}"
            self._client = httpx.AsyncClient(
                headers=headers, timeout=httpx.Timeout(self._timeout_s)
            )

    async def start(self) -> None:
        """Same as `load`."""
        await self.load()

    async def close(self) -> None:
        """Close the HTTP client (idempotent; safe before `start`)."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def __aenter__(self) -> OpenAICompatibleEmbeddings:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # --- embedding --------------------------------------------------------------------------

    async def embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        """Unit-length vectors for `texts`, in order."""
        if not texts:
            return []
        await self.load()
        assert self._client is not None
        body = {"model": self._model, "input": list(texts)}
        try:
            async with asyncio.timeout(self._timeout_s):
                response = await self._client.post(self._url, json=body)
        except (httpx.TimeoutException, TimeoutError) as exc:
            log.warning("embedding endpoint %s timed out (%s)", self._url, type(exc).__name__)
            raise Unavailable(
                f"the embedding endpoint {self._url} did not answer in {self._timeout_s:g}s"
            ) from exc
        except httpx.TransportError as exc:
            log.warning("embedding endpoint %s unreachable (%s)", self._url, type(exc).__name__)
            raise Unavailable(
                f"the embedding endpoint {self._url} is unreachable ({type(exc).__name__})"
            ) from exc
        status = response.status_code
        if status == 429:
            raise Overloaded(f"the embedding endpoint {self._url} is rate limiting (HTTP 429)")
        if status == 408 or status >= 500:
            log.warning("embedding endpoint %s answered HTTP %d", self._url, status)
            raise Unavailable(f"the embedding endpoint {self._url} answered HTTP {status}")
        if not response.is_success:
            raise EmbeddingError(f"the embedding endpoint {self._url} answered HTTP {status}")
        try:
            payload = response.json()
        except ValueError as exc:
            raise EmbeddingError(f"the embedding endpoint {self._url} answered non-JSON") from exc
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
