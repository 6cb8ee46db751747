"""Per-scope actors: one consumer task and one bounded mailbox per (username, graphname).

Every write for a scope is a job in its actor's mailbox, so the scope's writes run one at a
time in the order they were accepted. That holds within this process; servers sharing a
database are ordered by the store's scope write lock (store/scope_lock.py), and the actor keeps
that lock's queue to one waiter per server. A job carries a Future for its result or exception.
The registry finds or creates an actor and enqueues in one synchronous step (no await in
between), and evicts an actor only when its mailbox is empty and it is idle, also in one
synchronous step, so a job can never land in an actor that is going away.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from memory_server.lifecycle import Lifecycle
from memory_server.memory.errors import Overloaded, Unavailable
from memory_server.memory.identity import Scope

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(slots=True)
class _Envelope:
    job: Callable[[], Awaitable[Any]]
    future: asyncio.Future[Any]


@dataclass(slots=True)
class _Actor:
    scope: Scope
    mailbox: asyncio.Queue[_Envelope]
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
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        if not self._offer(scope, _Envelope(job, future)):
            raise Overloaded(
                f"too many writes queued for this user and graph (mailbox of "
                f"{self._mailbox_size}); retry later"
            )
        return await future

    # --- observability ---------------------------------------------------------------------

    @property
    def actors_alive(self) -> int:
        return len(self._actors)

    def mailbox_depth(self) -> int:
        return sum(a.mailbox.qsize() for a in self._actors.values())

    # --- internals -------------------------------------------------------------------------

    def _offer(self, scope: Scope, envelope: _Envelope) -> bool:
        # Synchronous from lookup to enqueue: the sweeper cannot evict in between.
        if not self._accepting:
            raise Unavailable(
                "the server is shutting down"
                if self._closed
                else "the actor registry is not started"
            )
        actor = self._actors.get(scope)
        if actor is None:
            actor = _Actor(scope, asyncio.Queue(self._mailbox_size))
            actor.task = asyncio.create_task(self._consume(actor), name="scope-actor")
            self._actors[scope] = actor
        try:
            actor.mailbox.put_nowait(envelope)
        except asyncio.QueueFull:
            return False
        return True

    async def _consume(self, actor: _Actor) -> None:
        while True:
            envelope = await actor.mailbox.get()
            actor.busy = True
            try:
                await self._execute(envelope)
            finally:
                actor.busy = False
                actor.last_active = time.monotonic()
                actor.mailbox.task_done()

    async def _execute(self, envelope: _Envelope) -> None:
        future = envelope.future
        if future.done():
            return  # the caller gave up (deadline, cancellation) before the job started
        try:
            result = await envelope.job()
        except asyncio.CancelledError:
            if not future.done():
                future.set_exception(Unavailable("the server is shutting down"))
            raise
        except Exception as exc:
            if not future.done():
                future.set_exception(exc)
        else:
            if not future.done():
                future.set_result(result)

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
