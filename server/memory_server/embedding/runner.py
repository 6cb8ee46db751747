"""One model behind the embedding pool: loaded on its first batch, a batch's vectors handed
back to the calls its texts came from, every failure turned into the callers' error.

The pool has one runner for its model and, where the model can run a second copy at the
lowest CPU priority (`SplitsBackground`), a second runner for the background lane.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable

from memory_server.embedding.backend import (
    AsyncEmbeddingBackend,
    DimensionMismatch,
    EmbeddingError,
)
from memory_server.embedding.lanes import Item
from memory_server.memory.errors import MemoryServiceError, Unavailable

log = logging.getLogger(__name__)


class Runner:
    """Runs batches on one backend, one at a time (its dispatcher awaits each)."""

    def __init__(self, backend: AsyncEmbeddingBackend) -> None:
        self.backend = backend
        self.in_flight: list[Item] = []
        self.loaded = False
        self.load_seconds: float | None = None

    async def run(self, batch: list[Item]) -> tuple[list[list[float]], float] | None:
        """Embeds the batch and completes its calls; (vectors, seconds), or None when it
        failed (its calls have the error)."""
        self.in_flight = batch
        try:
            if not self.loaded:
                await self._load()
            started = time.perf_counter()
            vectors = await self.backend.embed_batch([item.text for item in batch])
            seconds = time.perf_counter() - started
            self._check(vectors, len(batch))
        except asyncio.CancelledError:
            fail(batch, "the embedding pool is closed")
            raise
        except MemoryServiceError as exc:
            fail_with(batch, exc)
            return None
        except Exception as exc:
            # Never log a foreign exception's text: it may quote the input.
            name = self.backend.model_name
            log.warning("embedding backend %s failed (%s)", name, type(exc).__name__)
            fail(batch, f"the embedding model failed ({type(exc).__name__})")
            return None
        finally:
            self.in_flight = []
        for item, vector in zip(batch, vectors, strict=True):
            call = item.call
            call.results[item.index] = vector
            call.missing -= 1
            if call.missing == 0 and not call.future.done():
                call.future.set_result([v for v in call.results if v is not None])
        return vectors, seconds

    def abandon(self, reason: str) -> None:
        """Fails the calls of the batch in flight (its task was cancelled) with Unavailable."""
        fail(self.in_flight, reason)
        self.in_flight = []

    async def close(self, timeout_s: float) -> None:
        """Releases the backend; a failure or a timeout is logged, not raised."""
        name = self.backend.model_name
        try:
            async with asyncio.timeout(timeout_s):
                await self.backend.close()
        except TimeoutError:
            log.warning("embedding backend %s did not close in time", name)
        except Exception as exc:
            log.warning("embedding backend %s failed to close (%s)", name, type(exc).__name__)
        self.loaded = False

    async def _load(self) -> None:
        name = self.backend.model_name
        started = time.perf_counter()
        try:
            await self.backend.load()
        except MemoryServiceError:
            raise
        except Exception as exc:
            log.warning("embedding model %s failed to load (%s)", name, type(exc).__name__)
            raise Unavailable(f"the embedding model {name} could not be loaded") from exc
        self.load_seconds = time.perf_counter() - started
        self.loaded = True
        log.info("embedding model %s loaded in %.2fs", name, self.load_seconds)

    def _check(self, vectors: list[list[float]], expected: int) -> None:
        name, dimension = self.backend.model_name, self.backend.dimension
        if len(vectors) != expected:
            raise EmbeddingError(
                f"embedding model {name!r} returned {len(vectors)} vectors for {expected} texts"
            )
        for vector in vectors:
            if len(vector) != dimension:
                raise DimensionMismatch(name, dimension, len(vector))


def fail(items: Iterable[Item], reason: str) -> None:
    """Fails the calls of `items` still waiting with Unavailable(reason)."""
    for item in items:
        if not item.call.future.done():
            item.call.future.set_exception(Unavailable(reason))


def fail_with(items: Iterable[Item], exc: MemoryServiceError) -> None:
    for item in items:
        if not item.call.future.done():
            item.call.future.set_exception(exc)
