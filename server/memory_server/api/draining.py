"""Shutdown at the edge: every call that does not finish is answered UNAVAILABLE.

A client retries UNAVAILABLE (on another replica, or after the restart) and cannot tell
CANCELLED from its own cancellation, so it never retries that. Left to itself, gRPC answers
CANCELLED to the calls that reach a stopping server before their handler starts, and cuts the
ones still running when the grace period is over. So at SIGTERM, `stop_draining`:

1. refuses new calls at the edge, with UNAVAILABLE "the server is shutting down; retry", while
   the server still takes them (health already says NOT_SERVING);
2. lets the calls in flight finish, for `shutdown_grace_seconds` less a margin;
3. cancels those still running, which the edge answers UNAVAILABLE too (a write the handler had
   not committed is rolled back; one it had is found again by its id on the retry);
4. only then stops the gRPC server, with nothing left running.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

SHUTTING_DOWN = "the server is shutting down; retry"
# How long before the grace period ends the calls still running are answered: enough for the
# answers to leave before the server closes its connections.
_MARGIN_S = 0.5

log = logging.getLogger(__name__)


class InFlight:
    """The unary calls the edge is serving."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[object]] = set()
        self._idle = asyncio.Event()
        self._idle.set()
        #: New calls are answered UNAVAILABLE.
        self.refusing = False
        #: The calls still running were cancelled by `drain`.
        self.draining = False

    def enter(self) -> asyncio.Task[object] | None:
        """Notes the calling handler's task (None outside a task)."""
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
            self._idle.clear()
        return task

    def leave(self, task: asyncio.Task[object] | None) -> None:
        if task is not None:
            self._tasks.discard(task)
            if not self._tasks:
                self._idle.set()

    async def wait_idle(self, timeout_s: float) -> bool:
        """Whether every call in flight finished within `timeout_s`."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout_s)
        except TimeoutError:
            return False
        return True

    def drain(self) -> int:
        """Cancels the calls still running, so the edge answers them UNAVAILABLE; returns how
        many there were."""
        self.refusing = self.draining = True
        running = list(self._tasks)
        for task in running:
            task.cancel(SHUTTING_DOWN)
        return len(running)

    def drained(self, task: asyncio.Task[object] | None) -> bool:
        """Whether `task`'s cancellation is this drain's (then it is taken back, so the handler
        can still answer): a cancellation from anywhere else stays."""
        if not self.draining or task is None or task.cancelling() != 1:
            return False
        task.uncancel()
        return True


async def stop_draining(server: Any, in_flight: InFlight, grace_s: float) -> None:
    """Stops a grpc.aio `server` as the module docstring says, within `grace_s`."""
    in_flight.refusing = True
    if not await in_flight.wait_idle(max(0.0, grace_s - _MARGIN_S)):
        running = in_flight.drain()
        log.info("shutdown: %d call(s) still running answered UNAVAILABLE", running)
        await in_flight.wait_idle(_MARGIN_S)
    await server.stop(_MARGIN_S)
