"""Per-scope actors: one consumer task and one bounded mailbox per (username, graphname).

Every write for a scope is a job in its actor's mailbox, so the scope's writes run one at a
time in the order they were accepted. That holds within this process; servers sharing a
database are ordered by the store's scope write lock (store/scope_lock.py), and the actor keeps
that lock's queue to one waiter per server. A job carries a Future for its result or exception.
The registry finds or creates an actor and enqueues in one synchronous step (no await in
between), and evicts an actor only when its mailbox is empty and it is idle, also in one
synchronous step, so a job can never land in an actor that is going away.

`run_batched` jobs of one key that wait back to back in a mailbox run as one call (at most
BATCH_MAX items): AddFacts queued behind one another share one transaction, and nothing
accepted between them changes places with them.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from memory_server.lifecycle import Lifecycle
from memory_server.memory.errors import Overloaded, Unavailable
from memory_server.memory.identity import Scope

log = logging.getLogger(__name__)
T = TypeVar("T")
Item = TypeVar("Item")
BATCH_MAX = 64  # run_batched items in one call

Batch = Callable[[list[Any]], Awaitable[Sequence[Any]]]


@dataclass(slots=True)
class _Envelope:
    """One caller's job: `batch([item])`, or with the envelopes of the same `key` queued right
    behind it, one call of `batch` for all their items (a plain `run` job has no key)."""

    future: asyncio.Future[Any]
    batch: Batch
    item: Any = None
    key: str | None = None


class _Mailbox(asyncio.Queue[_Envelope]):
    """A bounded FIFO whose head can be looked at without taking it (asyncio.Queue keeps its
    items in `_queue`, the storage its subclasses LifoQueue and PriorityQueue replace)."""

    _queue: collections.deque[_Envelope]

    def head(self) -> _Envelope | None:
        return self._queue[0] if self._queue else None


@dataclass(slots=True)
class _Actor:
    scope: Scope
    mailbox: _Mailbox
    task: asyncio.Task[None] | None = None
    busy: bool = False
    last_active: float = field(default_factory=time.monotonic)


class ActorRegistry(Lifecycle):
    """Implements the domain's ScopeExecutor port."""

    def __init__(self, *, mailbox_size: int, idle_seconds: float) -> None:
        self._mailbox_size = mailbox_size
        self._idle_seconds = idle_seconds
        self._actors: dict[Scope, _Actor] = {}
        self._sweeper: asyncio.Task[None] | None = None
        self._retiring: set[asyncio.Task[None]] = set()  # evicted actors' tasks, until done
        self._accepting = False
        self._closed = False

    # --- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        if self._sweeper is None and not self._closed:
            self._accepting = True
            self._sweeper = asyncio.create_task(self._sweep(), name="actor-sweeper")

    async def close(self, drain_timeout_s: float = 10.0) -> None:
        """Stop accepting, let accepted jobs finish (up to the timeout), then stop. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._accepting = False
        actors = list(self._actors.values())
        if actors:
            drained = asyncio.gather(*(a.mailbox.join() for a in actors))
            try:
                await asyncio.wait_for(drained, timeout=drain_timeout_s)
            except TimeoutError:
                pending = sum(a.mailbox.qsize() for a in actors)
                log.warning(
                    "actors not drained after %.1fs: %d jobs dropped", drain_timeout_s, pending
                )
        tasks = [a.task for a in actors if a.task is not None] + list(self._retiring)
        if self._sweeper is not None:
            tasks.append(self._sweeper)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for actor in actors:
            self._fail_pending(actor, Unavailable("the server is shutting down"))
        self._actors.clear()

    # --- ScopeExecutor ---------------------------------------------------------------------

    async def run(self, scope: Scope, job: Callable[[], Awaitable[T]]) -> T:
        async def alone(_: list[Any]) -> list[T]:
            return [await job()]

        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._offer(scope, _Envelope(future, alone))
        return await future

    async def run_batched(
        self,
        scope: Scope,
        key: str,
        item: Item,
        batch: Callable[[list[Item]], Awaitable[Sequence[T | Exception]]],
    ) -> T:
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._offer(scope, _Envelope(future, batch, item, key))
        return await future

    # --- observability ---------------------------------------------------------------------

    @property
    def actors_alive(self) -> int:
        return len(self._actors)

    def mailbox_depth(self) -> int:
        return sum(a.mailbox.qsize() for a in self._actors.values())

    # --- internals -------------------------------------------------------------------------

    def _offer(self, scope: Scope, envelope: _Envelope) -> None:
        # Synchronous from lookup to enqueue: the sweeper cannot evict in between.
        if not self._accepting:
            raise Unavailable(
                "the server is shutting down"
                if self._closed
                else "the actor registry is not started"
            )
        actor = self._actors.get(scope)
        if actor is None:
            actor = _Actor(scope, _Mailbox(self._mailbox_size))
            actor.task = asyncio.create_task(self._consume(actor), name="scope-actor")
            self._actors[scope] = actor
        try:
            actor.mailbox.put_nowait(envelope)
        except asyncio.QueueFull:
            raise Overloaded(
                f"too many writes queued for this user and graph (mailbox of "
                f"{self._mailbox_size}); retry later"
            ) from None

    async def _consume(self, actor: _Actor) -> None:
        while True:
            taken = [await actor.mailbox.get()]
            key = taken[0].key
            while key is not None and len(taken) < BATCH_MAX:
                head = actor.mailbox.head()
                if head is None or head.key != key:
                    break
                taken.append(actor.mailbox.get_nowait())
            actor.busy = True
            try:
                await self._execute(taken)
            finally:
                actor.busy = False
                actor.last_active = time.monotonic()
                for _ in taken:
                    actor.mailbox.task_done()

    async def _execute(self, taken: list[_Envelope]) -> None:
        # A caller that gave up (deadline, cancellation) before its job started is left out.
        live = [e for e in taken if not e.future.done()]
        if not live:
            return
        try:
            results = await taken[0].batch([e.item for e in live])
            if len(results) != len(live):
                raise RuntimeError(f"a batch of {len(live)} answered {len(results)} results")
        except asyncio.CancelledError:
            for e in live:
                if not e.future.done():
                    e.future.set_exception(Unavailable("the server is shutting down"))
            raise
        except Exception as exc:
            for e in live:
                if not e.future.done():
                    e.future.set_exception(exc)
            return
        for e, result in zip(live, results, strict=True):
            if e.future.done():
                continue
            if isinstance(result, Exception):
                e.future.set_exception(result)
            else:
                e.future.set_result(result)

    async def _sweep(self) -> None:
        interval = min(max(self._idle_seconds / 2, 0.01), 5.0)
        while True:
            await asyncio.sleep(interval)
            self.evict_idle()

    def evict_idle(self) -> int:
        """Remove actors idle for longer than idle_seconds. Synchronous on purpose."""
        cutoff = time.monotonic() - self._idle_seconds
        idle = [
            a
            for a in self._actors.values()
            if not a.busy and a.mailbox.empty() and a.last_active < cutoff
        ]
        for actor in idle:
            del self._actors[actor.scope]
            if actor.task is not None:
                actor.task.cancel()
                self._retiring.add(actor.task)
                actor.task.add_done_callback(self._retiring.discard)
        return len(idle)

    @staticmethod
    def _fail_pending(actor: _Actor, exc: Exception) -> None:
        while not actor.mailbox.empty():
            envelope = actor.mailbox.get_nowait()
            actor.mailbox.task_done()
            if not envelope.future.done():
                envelope.future.set_exception(exc)
