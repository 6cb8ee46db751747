"""Recall's bookkeeping off the turn's path: which facts a turn handed back.

A turn used to run `UPDATE facts SET last_seen_at = now(), recall_count = recall_count + 1`
before it answered: the largest statement of a recall turn (issue 17), with row-lock waits
between the turns of one scope. Now recall only notes the fact ids here (no I/O, no await) and
one background task per process applies them in one statement per flush: every `interval_s`, or
sooner once `flush_at` distinct facts wait.

The counts are for retention and eviction, so they may lag a flush behind, and they add up
correctly with several servers: each adds its own counts, and last_seen_at only moves forward
(`greatest`). A database fault loses nothing: the batch goes back into the pending counts and
the next flush tries again (log, no raise). `close()` flushes what is left; what cannot be
written then is logged and dropped. At most `max_held` distinct facts wait; beyond that, new
ones are dropped (and counted in `dropped`) rather than growing without bound while the
database is away."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from memory_server.lifecycle import Lifecycle

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Seen:
    """How often a fact was recalled since the last flush, and when last."""

    count: int
    at: datetime


class SeenStore(Protocol):
    async def record_seen(self, seen: Mapping[str, Seen]) -> None:
        """Adds each fact's count to its recall_count and moves its last_seen_at forward to
        `at` (never back), in one statement. Facts that are gone are skipped."""
        ...


def _now() -> datetime:
    return datetime.now(UTC)


class SeenRecorder(Lifecycle):
    def __init__(
        self,
        store: SeenStore,
        *,
        interval_s: float = 1.0,
        flush_at: int = 512,
        max_held: int = 100_000,
        clock: Callable[[], datetime] = _now,
    ) -> None:
        self._store = store
        self._interval_s = interval_s
        self._flush_at = flush_at
        self._max_held = max_held
        self._clock = clock
        self._pending: dict[str, Seen] = {}
        self._due = asyncio.Event()
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self.dropped = 0  # recalls not counted because too many facts were waiting

    def record(self, fact_ids: Iterable[str]) -> None:
        """Notes that these facts were recalled now. Never blocks and never fails."""
        at = self._clock()
        for fact_id in fact_ids:
            seen = self._pending.get(fact_id)
            if seen is not None:
                seen.count += 1
                seen.at = max(seen.at, at)
            elif len(self._pending) < self._max_held:
                self._pending[fact_id] = Seen(1, at)
            else:
                self.dropped += 1
        if len(self._pending) >= self._flush_at:
            self._due.set()

    @property
    def pending(self) -> int:
        """Distinct facts waiting for the next flush."""
        return len(self._pending)

    async def flush(self) -> bool:
        """Writes what is pending in one statement; True if nothing is left waiting. On a
        fault the batch is merged back and the next flush retries it."""
        async with self._lock:
            batch, self._pending = self._pending, {}
            if not batch:
                return True
            try:
                await self._store.record_seen(batch)
            except Exception as exc:  # counters only: keep them for the next flush
                log.warning(
                    "recall counts not written (%d facts, retried): %s",
                    len(batch),
                    type(exc).__name__,
                )
                self._merge_back(batch)
                return False
            return not self._pending

    def _merge_back(self, batch: dict[str, Seen]) -> None:
        # What was recalled meanwhile is newer; the failed batch's counts add to it.
        newer, self._pending = self._pending, batch
        for fact_id, seen in newer.items():
            old = self._pending.get(fact_id)
            if old is not None:
                old.count += seen.count
                old.at = max(old.at, seen.at)
            elif len(self._pending) < self._max_held:
                self._pending[fact_id] = seen
            else:
                self.dropped += seen.count

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="recall-seen-flush")

    async def _run(self) -> None:
        while not self._closing:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._due.wait(), self._interval_s)
            self._due.clear()
            if not self._closing:
                await self.flush()

    async def close(self) -> None:
        # The loop is woken, not cancelled: a flush under way finishes (a cancelled one would
        # lose its batch), then the last one writes what is left.
        self._closing = True
        self._due.set()
        task, self._task = self._task, None
        if task is not None:
            await task
        if self._pending and not await self.flush():
            log.warning("recall counts of %d facts lost at shutdown", len(self._pending))
            self._pending = {}
