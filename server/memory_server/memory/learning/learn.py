"""Learning after a reply: read the turn (scrub, extract), reconcile the candidates against the
scope's live facts, apply the decisions.

Reading runs beside the scope's actor (an LLM call may take seconds, and the user's next
write must not wait for it); reconciling and applying run on it, so concurrent turns of one
user in one server never decide against a stale view. Servers sharing the database are
another matter: each apply runs under the scope's write lock and first checks that the live
facts are still the ones the decisions were made against, so two servers never write
duplicates either.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from memory_server.memory.background import finish_or_cancel
from memory_server.memory.errors import Unavailable
from memory_server.memory.facts.changes import FactChanges
from memory_server.memory.facts.model import AppliedChange, LiveFact, Provenance
from memory_server.memory.facts.reconcile import LiveFactsChanged, revision
from memory_server.memory.identity import Scope
from memory_server.memory.learning.reading import TurnReader
from memory_server.memory.ports import (
    FactStore,
    NoTelemetry,
    Reconciler,
    ScopeExecutor,
    Telemetry,
    VectorIndex,
)

log = logging.getLogger(__name__)

# Back-off of background learning while the database is unavailable (about 15 s in all).
_LEARN_RETRY_DELAYS_S = (0.5, 1.0, 2.0, 4.0, 8.0)
# Reconciliations of one turn when other servers keep changing the scope's facts meanwhile;
# the last one's decisions are applied after only the cheap re-check (reconcile.revalidate).
_RECONCILE_TRIES = 3


@dataclass(frozen=True, slots=True)
class LearnInput:
    scope: Scope
    conversation_id: str
    user_message_id: str
    user_text: str
    assistant_text: str
    # When the user said it (the stored message's created_at; an import keeps the original):
    # what is learned is valid from then, and "yesterday" in it is the day before.
    said_at: datetime | None = None


@dataclass(kw_only=True, eq=False)
class Learning:
    store: FactStore
    reader: TurnReader
    reconciler: Reconciler
    changes: FactChanges
    # The live facts' vectors, so reconciliation embeds only the candidates.
    index: VectorIndex
    executor: ScopeExecutor
    telemetry: Telemetry = field(default_factory=NoTelemetry)
    _tasks: set[asyncio.Task[None]] = field(init=False, default_factory=set)
    _closed: bool = field(init=False, default=False)

    async def learn(self, turn: LearnInput) -> list[AppliedChange]:
        """Read the turn beside the actor, then reconcile and apply on the scope's actor,
        against the live facts as they are at that moment.

        Reconciliation embeds (or asks an LLM), so it runs before the scope's write lock is
        taken; another server may commit facts of the scope meanwhile. The apply therefore
        re-reads the live facts under the lock and, if they changed, writes nothing and this
        reconciles again against the new ones."""
        scrubbed = await self.reader.scrub(turn.user_text, turn.assistant_text)
        if scrubbed is None:
            return []
        user_text, assistant_text = scrubbed
        known = await self.store.live_facts(turn.scope)
        read = await self.reader.extract(
            user_text, assistant_text, [f.text for f in known], turn.said_at
        )
        if read is None:
            return []
        provenance = Provenance(turn.conversation_id, turn.user_message_id, read.extractor)

        async def job() -> list[AppliedChange]:
            tries = 1
            while True:
                live = await self.store.live_facts(turn.scope)
                decisions = await self.reconciler.reconcile(
                    read.candidates,
                    live,
                    live_vectors=await self._known_vectors(turn.scope, live),
                )
                revise = revision(live, decisions, last=tries == _RECONCILE_TRIES)
                try:
                    return await self.changes.apply(turn.scope, decisions, provenance, revise)
                except LiveFactsChanged:
                    log.debug("facts changed by another writer; reconciling again")
                    tries += 1

        return await self.executor.run(turn.scope, job)

    @property
    def pending(self) -> int:
        """Background learning tasks not finished yet (0: every accepted turn is learned)."""
        return len(self._tasks)

    def learn_soon(self, turn: Callable[[], Awaitable[LearnInput | None]]) -> None:
        """Learning in the background (fact_extract_async) from the turn that `turn` looks
        up; the task is owned and awaited on close."""
        if self._closed:
            return

        async def run() -> None:
            began = time.perf_counter()
            try:
                await self._attempts(turn)
            finally:
                self.telemetry.learned(time.perf_counter() - began)

        task = asyncio.create_task(run(), name="learn")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _attempts(self, turn: Callable[[], Awaitable[LearnInput | None]]) -> None:
        # A database fault (a restart, a dropped connection) is retried: the turn is stored,
        # and learning from it again is safe (what was applied is NONE now).
        for delay_s in (*_LEARN_RETRY_DELAYS_S, None):
            try:
                found = await turn()
                if found is not None:
                    await self.learn(found)
                return
            except Unavailable as exc:
                if delay_s is None or self._closed:
                    log.warning("background fact extraction gave up: %s", exc)
                    return
                log.info("background fact extraction retries in %.1fs: %s", delay_s, exc)
                await asyncio.sleep(delay_s)
            except Exception:
                log.exception("background fact extraction failed")
                return

    async def _known_vectors(
        self, scope: Scope, live: Sequence[LiveFact]
    ) -> dict[str, list[float]]:
        """Vectors the index already has for the live facts. A fact the index has no vector
        for is embedded again, and counted and logged: a miss on every pass means the index's
        replies are not being read, not that re-embedding is normal."""
        if not live:
            return {}
        try:
            known = await self.index.vectors(scope.scope_hash, [f.version_id for f in live])
        except Exception as exc:
            self.telemetry.live_vectors_missing(len(live))
            log.warning("live fact vectors unavailable, embedding instead: %s", type(exc).__name__)
            return {}
        missing = sum(1 for f in live if f.version_id not in known)
        if missing:
            self.telemetry.live_vectors_missing(missing)
            # INFO: facts the outbox has not indexed yet miss too; a miss on every pass is the
            # sign of misread replies.
            log.info(
                "the %s index has no vector for %d of %d live facts; embedding them again",
                self.index.name,
                missing,
                len(live),
            )
        return known

    async def close(self, timeout_s: float = 10.0) -> None:
        """Let background learning finish (bounded), then cancel. Idempotent."""
        self._closed = True
        await finish_or_cancel(list(self._tasks), timeout_s)
