"""One embedding pool for every scope: concurrent `embed` calls are coalesced into batches.

Each call's texts join a bounded FIFO queue, one item per text. A dispatcher task takes up to
`max_batch` texts at a time, waiting at most `max_wait_ms` after the oldest queued text for
more to arrive, runs the batch on the backend and hands each vector back to the call it came
from, in that call's order. A call with more than `max_batch` texts simply spans several
batches. The backend is loaded on the first batch, so a server whose users have no facts never
loads a model. A synchronous backend runs on one worker thread owned by the pool; an async
backend is awaited on the loop.

The wait costs a lone call up to `max_wait_ms`, so it is 0 by default (bench/README.md,
"Figures behind the code"): texts are still batched whenever they queue up while the backend
is busy, which is when batching pays.

Two lanes (embedding.lanes): foreground texts (a turn's question, a fact being reconciled) and
background texts (the outbox indexing facts and episodes, through `background()`). A model that
can run a second copy (`SplitsBackground`: MiniLM) embeds the background lane on
that copy in a worker process at the lowest CPU priority (embedding.process), so that an
imported history's episodes take only the CPU that turns and PostgreSQL leave idle; any other
model (an HTTP endpoint) takes a background batch, a few texts at a time, only when no
foreground text waits.

A bounded LRU cache (embedding.cache) sits in front of both lanes. `cache_size=0` turns it off.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import cast

from memory_server.embedding.backend import (
    AsyncEmbeddingBackend,
    EmbeddingBackend,
    SplitsBackground,
    is_async_backend,
)
from memory_server.embedding.cache import VectorCache
from memory_server.embedding.lanes import Call, Item, Lanes
from memory_server.embedding.process import ProcessBackend
from memory_server.embedding.runner import Runner, fail
from memory_server.embedding.threaded import ThreadedBackend
from memory_server.lifecycle import Lifecycle
from memory_server.memory.errors import Overloaded, Unavailable

log = logging.getLogger(__name__)
# The model's threads run this much nicer than the service's own (embedding.threaded): a fact
# import's embedding then yields the CPU to the event loop and PostgreSQL instead of slowing
# every other scope's turns. The background copy runs in a process at SCHED_IDLE.
EMBEDDING_NICE = 10


class EmbeddingPool(Lifecycle):
    """Implements the domain's Embedder port for all scopes over one backend."""

    def __init__(
        self,
        backend: EmbeddingBackend | AsyncEmbeddingBackend,
        *,
        max_batch: int = 32,
        max_wait_ms: float = 0.0,
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
        self._runner = Runner(_on_loop(backend, nice=EMBEDDING_NICE))
        # The background lane's own copy of the model, when it can run one.
        self._background_runner = (
            Runner(
                ProcessBackend(
                    backend.background_factory(),
                    model_name=backend.model_name,
                    dimension=backend.dimension,
                )
            )
            if isinstance(backend, SplitsBackground) and not is_async_backend(backend)
            else None
        )
        self._max_batch = max_batch
        self._max_wait_s = max_wait_ms / 1000.0
        self._max_queue = max_queue
        self._lanes = Lanes()
        self._arrived = asyncio.Event()
        self._background_arrived = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._accepting = False
        self._closing = False  # close() began: dispatch what is queued without waiting
        self._closed = False
        self._batches = 0
        self._texts = 0
        self._last_batch_size = 0
        self._observe_batch = observe_batch
        self._cache = VectorCache(cache_size)

    # --- Embedder ---------------------------------------------------------------------------

    @property
    def model_name(self) -> str:
        return self._runner.backend.model_name

    @property
    def dimension(self) -> int:
        return self._runner.backend.dimension

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Unit-length vectors for `texts`, in order, ahead of background work. Raises
        Overloaded when the queue cannot take them all, Unavailable when the pool is not
        running or the model cannot be used."""
        return await self._embed(texts, self._lanes.foreground)

    def background(self) -> BackgroundLane:
        """An Embedder over this pool for work nobody waits on (the outbox)."""
        return BackgroundLane(self)

    async def _embed(self, texts: Sequence[str], lane: deque[Item]) -> list[list[float]]:
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
        wanted = self._cache.lookup(self.model_name, self.dimension, texts, results)
        if wanted:
            vectors = await self._enqueue([texts[i] for i in wanted], lane)
            for i, vector in zip(wanted, vectors, strict=True):
                results[i] = vector
        return cast(list[list[float]], results)

    async def _enqueue(self, texts: Sequence[str], lane: deque[Item]) -> list[list[float]]:
        count = len(texts)
        # A question is refused only for questions queued: background work never crowds it out.
        foreground = lane is self._lanes.foreground
        depth = len(lane) if foreground else len(self._lanes)
        if depth + count > self._max_queue:
            raise Overloaded(
                f"the embedding queue is full ({depth} of {self._max_queue} texts "
                f"queued, {count} more asked); retry later"
            )
        loop = asyncio.get_running_loop()
        call = Call(loop.create_future(), [None] * count, count)
        now = loop.time()
        lane.extend(Item(call, i, text, now) for i, text in enumerate(texts))
        if foreground or self._background_runner is None:
            self._arrived.set()
        else:
            self._background_arrived.set()
        return await call.future

    # --- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the dispatchers (idempotent). The model itself loads on the first embed."""
        if self._tasks or self._closed:
            return
        self._accepting = True
        self._tasks.append(asyncio.create_task(self._dispatch(), name="embedding-pool"))
        if self._background_runner is not None:
            self._tasks.append(
                asyncio.create_task(self._dispatch_background(), name="embedding-background")
            )

    async def close(self, drain_timeout_s: float = 10.0) -> None:
        """Stop accepting, embed what is queued (up to the timeout), fail the rest with
        Unavailable, release the backend. Idempotent; safe before `start`."""
        if self._closed:
            return
        self._closed = True
        self._accepting = False
        self._closing = True
        self._arrived.set()
        self._background_arrived.set()
        tasks, self._tasks = self._tasks, []
        runners = [r for r in (self._runner, self._background_runner) if r is not None]
        deadline = time.monotonic() + drain_timeout_s
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=drain_timeout_s)
            if pending:
                log.warning(
                    "embedding pool not drained after %.1fs: %d texts dropped",
                    drain_timeout_s,
                    len(self._lanes) + sum(len(r.in_flight) for r in runners),
                )
                for task in pending:
                    task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        for runner in runners:
            runner.abandon("the embedding pool is closed")
        fail(self._lanes.drain(), "the embedding pool is closed")
        for runner in runners:
            await runner.close(max(deadline - time.monotonic(), 1.0))

    # --- observability ----------------------------------------------------------------------

    @property
    def loaded(self) -> bool:
        """Whether the backend's model is loaded (False until the first batch)."""
        return self._runner.loaded

    @property
    def load_seconds(self) -> float | None:
        """How long the model took to load; None until it has."""
        return self._runner.load_seconds

    @property
    def batches(self) -> int:
        """Backend batches run successfully (both lanes)."""
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
        return self._cache.hits

    @property
    def cache_misses(self) -> int:
        """Texts the cache did not hold (when it is on)."""
        return self._cache.misses

    @property
    def cache_entries(self) -> int:
        return len(self._cache)

    @property
    def queue_depth(self) -> int:
        """Texts waiting for a batch, both lanes (including those of calls that gave up)."""
        return len(self._lanes)

    # --- internals --------------------------------------------------------------------------

    async def _dispatch(self) -> None:
        """Foreground batches, and background ones too when the model has no second copy."""
        loop = asyncio.get_running_loop()
        shared = self._background_runner is None
        while True:
            while not (self._lanes if shared else self._lanes.foreground):
                if self._closing:
                    return
                self._arrived.clear()
                await self._arrived.wait()
            foreground = self._lanes.foreground
            if foreground:  # wait up to max_wait for a fuller batch
                deadline = foreground[0].queued_at + self._max_wait_s
                while len(foreground) < self._max_batch and not self._closing:
                    remaining = deadline - loop.time()
                    if remaining <= 0:
                        break
                    self._arrived.clear()
                    try:
                        async with asyncio.timeout(remaining):
                            await self._arrived.wait()
                    except TimeoutError:
                        break
            batch = self._lanes.take(self._max_batch, background=shared)
            if batch:
                await self._run(self._runner, batch)

    async def _dispatch_background(self) -> None:
        """Background batches on the model's second copy, as they come."""
        assert self._background_runner is not None
        while True:
            while not self._lanes.background:
                if self._closing:
                    return
                self._background_arrived.clear()
                await self._background_arrived.wait()
            batch = self._lanes.take_background(self._max_batch)
            if batch:
                await self._run(self._background_runner, batch)

    async def _run(self, runner: Runner, batch: list[Item]) -> None:
        done = await runner.run(batch)
        if done is None:
            return
        vectors, seconds = done
        self._batches += 1
        self._texts += len(batch)
        self._last_batch_size = len(batch)
        if self._observe_batch is not None:
            self._observe_batch(len(batch), seconds)
        texts = [item.text for item in batch]
        self._cache.remember(self.model_name, self.dimension, texts, vectors)


def _on_loop(
    backend: EmbeddingBackend | AsyncEmbeddingBackend, *, nice: int
) -> AsyncEmbeddingBackend:
    """The backend as the loop awaits it: a synchronous one on a worker thread of its own."""
    if is_async_backend(backend):
        return backend
    return ThreadedBackend(cast(EmbeddingBackend, backend), nice=nice)


class BackgroundLane:
    """The Embedder the outbox uses: the pool's model, behind every foreground text."""

    def __init__(self, pool: EmbeddingPool) -> None:
        self._pool = pool

    @property
    def model_name(self) -> str:
        return self._pool.model_name

    @property
    def dimension(self) -> int:
        return self._pool.dimension

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors for `texts`, in order, in the pool's background lane."""
        return await self._pool._embed(texts, self._pool._lanes.background)
