"""Retention: facts nobody stated again or recalled for `ltm_retention_days` expire.

Expiry closes the fact's live version (transaction time), on the scope's actor so it never
races with a turn's reconciliation; as-of queries before that moment still see it. A fact
that stayed expired for `purge_after_days` more is erased with its versions, history and
vectors. Messages said more than `ltm_retention_days` ago stop being episodes: their vectors
leave the index and searches no longer find them, while the conversation keeps them (its
history is not long-term memory). (Past `max_facts_per_scope`, the store evicts the least
recently seen facts as new ones arrive: see FactStore.apply_batch.)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import UTC, datetime, timedelta

from memory_server.memory.errors import Unavailable
from memory_server.memory.ports import (
    EpisodeStore,
    FactStore,
    IndexOutbox,
    NoOutbox,
    ScopeExecutor,
)
from memory_server.memory.recall.seen import SeenRecorder

log = logging.getLogger(__name__)
# Messages a retention statement stops recalling at most (one transaction each).
_EPISODE_BATCH = 10_000


class RetentionJob:
    def __init__(
        self,
        store: FactStore,
        executor: ScopeExecutor,
        *,
        retention_days: int,
        interval_s: float,
        purge_after_days: int = 30,
        outbox: IndexOutbox | None = None,
        seen: SeenRecorder | None = None,
        episodes: EpisodeStore | None = None,
    ) -> None:
        self._store = store
        self._episodes = episodes
        self._seen = seen
        self._executor = executor
        self._retention = timedelta(days=retention_days)
        self._purge_after = timedelta(days=purge_after_days)
        self._interval_s = interval_s
        self._outbox = outbox or NoOutbox()
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self.expired = 0
        self.purged = 0
        self.episodes_expired = 0

    async def run_once(self, now: datetime | None = None) -> tuple[int, int]:
        """One pass over every scope; returns (facts expired, facts purged)."""
        now = now or datetime.now(UTC)
        cutoff = now - self._retention
        if self._seen is not None:
            # This process's recalls not yet flushed count first (another server's may still
            # be up to its flush interval behind: a fact recalled there within that second
            # of its retention deadline can expire).
            await self._seen.flush()
        expired = 0
        for scope in await self._store.stale_scopes(cutoff):
            expired += await self._executor.run(
                scope,
                lambda scope=scope: self._store.expire(scope, cutoff),  # type: ignore[misc]
            )
        purged = await self._store.purge_expired(now - self._purge_after)
        episodes = await self._expire_episodes(cutoff)
        if expired or purged or episodes:
            log.info(
                "retention: %d facts expired, %d purged, %d episodes expired",
                expired,
                purged,
                episodes,
            )
            self._outbox.facts_changed()
        self.expired += expired
        self.purged += purged
        return expired, purged

    async def _expire_episodes(self, cutoff: datetime) -> int:
        """Messages said before `cutoff` stop being episodes, a bounded batch a statement."""
        if self._episodes is None:
            return 0
        total = 0
        while (done := await self._episodes.expire_episodes(cutoff, _EPISODE_BATCH)) > 0:
            total += done
            if done < _EPISODE_BATCH:
                break
        self.episodes_expired += total
        return total

    async def start(self) -> None:
        if self._task is None and not self._closed:
            self._task = asyncio.create_task(self._run(), name="retention")

    async def close(self) -> None:
        self._closed = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        while True:
            try:
                await self.run_once()
            except Unavailable as exc:
                log.warning("retention pass skipped: %s", exc)
            except Exception:
                log.exception("retention pass failed")
            await asyncio.sleep(self._interval_s)
