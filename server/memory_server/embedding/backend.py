"""What the embedding pool runs: a model that turns a batch of texts into vectors.

Two shapes, one contract. A CPU-bound model implements `EmbeddingBackend` (plain methods; the
pool runs them on its one worker thread, never on the event loop). A remote model implements
`AsyncEmbeddingBackend` (coroutines; the pool awaits them on the loop). Either way `load()` is
called once, lazily, before the first batch, and `close()` releases what `load()` took.
Vectors come back in input order, `dimension` floats each, unit length.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from typing import Protocol, TypeGuard, runtime_checkable

from memory_server.memory.errors import MemoryServiceError


class EmbeddingError(MemoryServiceError):
    """The embedding model answered, but not with usable vectors (a configuration problem or a
    broken endpoint, not a transient one). Its text never quotes the input."""


class DimensionMismatch(EmbeddingError):
    """The model's vectors do not have the configured number of dimensions."""

    def __init__(self, model: str, expected: int, got: int) -> None:
        super().__init__(
            f"embedding model {model!r} returned {got}-dimensional vectors; "
            f"{expected} are configured"
        )
        self.expected = expected
        self.got = got


class EmbeddingBackend(Protocol):
    """A synchronous (CPU-bound) model. Every method runs on the pool's worker thread."""

    @property
    def model_name(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    def load(self) -> None:
        """Load the model (called once before the first batch; may be slow)."""
        ...

    def embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit-length vector per text, in order."""
        ...

    def close(self) -> None:
        """Release the model (idempotent; safe when never loaded)."""
        ...


@runtime_checkable
class SplitsBackground(Protocol):
    """A synchronous model that can run a second copy of itself for background work (the pool
    runs that copy in a lowest-priority worker process: embedding.process)."""

    def background_factory(self) -> Callable[[], EmbeddingBackend]:
        """What makes the copy, picklable (a class or a functools.partial of one)."""
        ...


class AsyncEmbeddingBackend(Protocol):
    """An I/O-bound model (an HTTP endpoint). Every method runs on the event loop."""

    @property
    def model_name(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    async def load(self) -> None:
        """Open connections (called once before the first batch)."""
        ...

    async def embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit-length vector per text, in order."""
        ...

    async def close(self) -> None:
        """Release connections (idempotent; safe when never loaded)."""
        ...


def is_async_backend(
    backend: EmbeddingBackend | AsyncEmbeddingBackend,
) -> TypeGuard[AsyncEmbeddingBackend]:
    """True when the backend's `embed_batch` is a coroutine function."""
    return inspect.iscoroutinefunction(backend.embed_batch)


def l2_normalize(vector: Sequence[float]) -> list[float]:
    """`vector` scaled to unit length; EmbeddingError for a zero (or non-finite) vector."""
    norm = math.hypot(*vector)
    if not math.isfinite(norm) or norm == 0.0:
        raise EmbeddingError("the embedding model returned a zero or non-finite vector")
    return [float(x) / norm for x in vector]
