"""One embedding pool for every scope: concurrent `embed` calls are coalesced into batches.

Each call's texts join one bounded FIFO queue, one item per text. A single dispatcher task takes
up to `max_batch` texts at a time, waiting at most `max_wait_ms` after the oldest queued text
for more to arrive, runs the batch on the backend and hands each vector back to the call it
came from, in that call's order. A call with more than `max_batch` texts simply spans several
batches. The backend is loaded on the first batch, so a server whose users have no facts never
loads a model. A synchronous backend runs on one worker thread owned by the pool; an async
backend is awaited on the loop.

The wait costs a lone call up to `max_wait_ms` (what that is beside one MiniLM query: see
bench/README.md, "Figures behind the code"); with `max_wait_ms=0` texts are still batched
whenever they queue up while the backend is busy, which is when batching pays.

A bounded LRU cache of recent (model, dimension, text) -> vector sits in front of the queue, so a
text embedded twice in one process (the reconciler embeds a new fact to find near-duplicates, the
outbox embeds it again to index it) reaches the backend once. Vectors are stored as immutable
float64 arrays and every caller gets its own list copy, so a hit is bit-identical to the miss that
filled it. The key carries the model's name and dimension, and the cache lives in the pool, which
serves one backend: another model never sees these vectors. `cache_size=0` turns it off.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from array import array
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import cast

from memory_server.embedding.backend import (
    AsyncEmbeddingBackend,
    DimensionMismatch,
    EmbeddingBackend,
    EmbeddingError,
    is_async_backend,
)
from memory_server.embedding.threaded import ThreadedBackend
from memory_server.lifecycle import Lifecycle
from memory_server.memory.errors import MemoryServiceError, Overloaded, Unavailable

log = logging.getLogger(__name__)
# The model's threads run this much nicer than the service's own (embedding.threaded): bulk
# embedding (an imported history's episodes, a fact import) then yields the CPU to the event
# loop and PostgreSQL instead of slowing every other scope's turns.
EMBEDDING_NICE = 10


@dataclass(slots=True)
class _Call:
    """One `embed` call: its future and the vectors gathered so far."""

    future: asyncio.Future[list[list[float]]]
    results: list[list[float] | None]
    missing: int


@dataclass(slots=True)
class _Item:
    """One queued text."""

    call: _Call
    index: int
    text: str
    queued_at: float  # loop time


class EmbeddingPool(Lifecycle):
    """Implements the domain's Embedder port for all scopes over one backend."""

    def __init__(
        self,
        backend: EmbeddingBackend | AsyncEmbeddingBackend,
        *,
        max_batch: int = 32,
        max_wait_ms: float = 2.0,
        max_queue: int = 4096,
        cache_size: int = 2048,
        observe_batch: Callable[[int, float], None] | None = None,
    ) -> None:
        """`observe_batch(texts, seconds)` is told of every batch the backend embedded."""
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        if max_wait_ms < 0:
            raise ValueError("max_wait_ms must not be negative")
        if max_queue < 1:
            raise ValueError("max_queue must be at least 1")
        if cache_size < 0:
            raise ValueError("cache_size must not be negative")
        self._backend: AsyncEmbeddingBackend
        if is_async_backend(backend):
            self._backend = backend
        else:  # a TypeGuard does not narrow the other branch
            self._backend = ThreadedBackend(cast(EmbeddingBackend, backend), nice=EMBEDDING_NICE)
        self._max_batch = max_batch
        self._max_wait_s = max_wait_ms / 1000.0
        self._max_queue = max_queue
        self._queue: deque[_Item] = deque()
        self._arrived = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._accepting = False
        self._closing = False  # close() began: dispatch what is queued without waiting
        self._closed = False
        self._in_flight: list[_Item] = []
        self._loaded = False
        self._load_seconds: float | None = None
        self._batches = 0
        self._texts = 0
        self._last_batch_size = 0
        self._observe_batch = observe_batch
        self._cache_size = cache_size
        self._cache: OrderedDict[tuple[str, int, str], array[float]] = OrderedDict()
        self._cache_lock = threading.Lock()  # the loop is the only user today; cheap insurance
        self._cache_hits = 0
        self._cache_misses = 0

    # --- Embedder ---------------------------------------------------------------------------

    @property
    def model_name(self) -> str:
        return self._backend.model_name

    @property
    def dimension(self) -> int:
        return self._backend.dimension

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Unit-length vectors for `texts`, in order. Raises Overloaded when the queue cannot
        take them all, Unavailable when the pool is not running or the model cannot be used."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not one str")
        if not self._accepting:
            raise Unavailable(
                "the embedding pool is closed"
                if self._closed
                else "the embedding pool is not started"
            )
        if len(texts) == 0:
            return []
        results: list[list[float] | None] = [None] * len(texts)
        wanted: list[int] = []  # indexes of texts the cache does not hold
        if self._cache_size:
            model, dimension = self.model_name, self.dimension
            with self._cache_lock:
                for i, text in enumerate(texts):
                    cached = self._cache.get((model, dimension, text))
                    if cached is None:
                        wanted.append(i)
                    else:
                        self._cache.move_to_end((model, dimension, text))
                        results[i] = cached.tolist()
                self._cache_hits += len(texts) - len(wanted)
                self._cache_misses += len(wanted)
        else:
            wanted = list(range(len(texts)))
        if not wanted:
            return cast(list[list[float]], results)
        vectors = await self._enqueue([texts[i] for i in wanted])
        for i, vector in zip(wanted, vectors, strict=True):
            results[i] = vector
        return cast(list[list[float]], results)

    async def _enqueue(self, texts: Sequence[str]) -> list[list[float]]:
        count = len(texts)
        if len(self._queue) + count > self._max_queue:
            raise Overloaded(
                f"the embedding queue is full ({len(self._queue)} of {self._max_queue} texts "
                f"queued, {count} more asked); retry later"
            )
        loop = asyncio.get_running_loop()
        call = _Call(loop.create_future(), [None] * count, count)
        now = loop.time()
        self._queue.extend(_Item(call, i, text, now) for i, text in enumerate(texts))
        self._arrived.set()
        return await call.future

    # --- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the dispatcher (idempotent). The model itself loads on the first embed."""
        if self._task is None and not self._closed:
            self._accepting = True
            self._task = asyncio.create_task(self._dispatch(), name="embedding-pool")

    async def close(self, drain_timeout_s: float = 10.0) -> None:
        """Stop accepting, embed what is queued (up to the timeout), fail the rest with
        Unavailable, release the backend. Idempotent; safe before `start`."""
        if self._closed:
            return
        self._closed = True
        self._accepting = False
        self._closing = True
        self._arrived.set()
        task, self._task = self._task, None
        deadline = time.monotonic() + drain_timeout_s
        if task is not None:
            done, _ = await asyncio.wait({task}, timeout=drain_timeout_s)
            if not done:
                log.warning(
                    "embedding pool not drained after %.1fs: %d texts dropped",
                    drain_timeout_s,
                    len(self._queue) + len(self._in_flight),
                )
                task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        self._fail(self._in_flight, "the embedding pool is closed")
        self._fail(self._queue, "the embedding pool is closed")
        self._queue.clear()
        self._in_flight = []
        try:
            async with asyncio.timeout(max(deadline - time.monotonic(), 1.0)):
                await self._backend.close()
        except TimeoutError:
            log.warning("embedding backend %s did not close in time", self.model_name)
        except Exception as exc:
            log.warning(
                "embedding backend %s failed to close (%s)", self.model_name, type(exc).__name__
            )
        self._loaded = False

    # --- observability ----------------------------------------------------------------------

    @property
    def loaded(self) -> bool:
        """Whether the backend's model is loaded (False until the first batch)."""
        return self._loaded

    @property
    def load_seconds(self) -> float | None:
        """How long the model took to load; None until it has."""
        return self._load_seconds

    @property
    def batches(self) -> int:
        """Backend batches run successfully."""
        return self._batches

    @property
    def texts(self) -> int:
        """Texts embedded successfully."""
        return self._texts

    @property
    def last_batch_size(self) -> int:
        return self._last_batch_size

    @property
    def mean_batch_size(self) -> float:
        return self._texts / self._batches if self._batches else 0.0

    @property
    def cache_hits(self) -> int:
        """Texts answered from the cache without reaching the backend."""
        return self._cache_hits

    @property
    def cache_misses(self) -> int:
        """Texts the cache did not hold (when it is on)."""
        return self._cache_misses

    @property
    def cache_entries(self) -> int:
        return len(self._cache)

    @property
    def queue_depth(self) -> int:
        """Texts waiting for a batch (including those of calls that gave up)."""
        return len(self._queue)

    # --- internals --------------------------------------------------------------------------

    async def _dispatch(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            while not self._queue:
                if self._closing:
                    return
                self._arrived.clear()
                await self._arrived.wait()
            deadline = self._queue[0].queued_at + self._max_wait_s
            while len(self._queue) < self._max_batch and not self._closing:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                self._arrived.clear()
                try:
                    async with asyncio.timeout(remaining):
                        await self._arrived.wait()
                except TimeoutError:
                    break
            batch = self._take()
            if batch:
                await self._run(batch)

    def _take(self) -> list[_Item]:
        """Up to max_batch queued texts whose callers still wait."""
        batch: list[_Item] = []
        while self._queue and len(batch) < self._max_batch:
            item = self._queue.popleft()
            if not item.call.future.done():
                batch.append(item)
        return batch

    async def _run(self, batch: list[_Item]) -> None:
        self._in_flight = batch
        try:
            if not self._loaded:
                await self._load()
            started = time.perf_counter()
            vectors = await self._backend.embed_batch([item.text for item in batch])
            seconds = time.perf_counter() - started
            self._check(vectors, len(batch))
        except asyncio.CancelledError:
            self._fail(batch, "the embedding pool is closed")
            raise
        except MemoryServiceError as exc:
            self._fail_with(batch, exc)
            return
        except Exception as exc:
            # Never log a foreign exception's text: it may quote the input.
            log.warning("embedding backend %s failed (%s)", self.model_name, type(exc).__name__)
            self._fail(batch, f"the embedding model failed ({type(exc).__name__})")
            return
        finally:
            self._in_flight = []
        self._batches += 1
        self._texts += len(batch)
        self._last_batch_size = len(batch)
        if self._observe_batch is not None:
            self._observe_batch(len(batch), seconds)
        self._remember(batch, vectors)
        for item, vector in zip(batch, vectors, strict=True):
            call = item.call
            call.results[item.index] = vector
            call.missing -= 1
            if call.missing == 0 and not call.future.done():
                call.future.set_result([v for v in call.results if v is not None])

    def _remember(self, batch: list[_Item], vectors: list[list[float]]) -> None:
        """Put a batch's vectors in the LRU cache, evicting the least recently used."""
        if not self._cache_size:
            return
        model, dimension = self.model_name, self.dimension
        with self._cache_lock:
            for item, vector in zip(batch, vectors, strict=True):
                key = (model, dimension, item.text)
                self._cache[key] = array("d", vector)
                self._cache.move_to_end(key)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)

    async def _load(self) -> None:
        started = time.perf_counter()
        try:
            await self._backend.load()
        except MemoryServiceError:
            raise
        except Exception as exc:
            log.warning(
                "embedding model %s failed to load (%s)", self.model_name, type(exc).__name__
            )
            raise Unavailable(f"the embedding model {self.model_name} could not be loaded") from exc
        self._load_seconds = time.perf_counter() - started
        self._loaded = True
        log.info("embedding model %s loaded in %.2fs", self.model_name, self._load_seconds)

    def _check(self, vectors: list[list[float]], expected: int) -> None:
        if len(vectors) != expected:
            raise EmbeddingError(
                f"embedding model {self.model_name!r} returned {len(vectors)} vectors "
                f"for {expected} texts"
            )
        for vector in vectors:
            if len(vector) != self.dimension:
                raise DimensionMismatch(self.model_name, self.dimension, len(vector))

    @staticmethod
    def _fail(items: Iterable[_Item], reason: str) -> None:
        for item in items:
            if not item.call.future.done():
                item.call.future.set_exception(Unavailable(reason))

    @staticmethod
    def _fail_with(items: Iterable[_Item], exc: MemoryServiceError) -> None:
        for item in items:
            if not item.call.future.done():
                item.call.future.set_exception(exc)
