"""The manual fact operations and reads: AddFact, AddFacts, UpdateFact, DeleteFact, ForgetScope,
ListFacts, GetFact, GetFactHistory.

Every change runs on the scope's actor, so it is decided against the live facts as the
changes accepted before it left them; the store re-checks under the scope's write lock, so
servers sharing the database never write the same fact twice either.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

from memory_server.memory.errors import NotFound
from memory_server.memory.facts.changes import FactChanges
from memory_server.memory.facts.model import (
    AppliedChange,
    Candidate,
    Decision,
    FactKind,
    FactVersion,
    HistoryEvent,
    NewFact,
    Provenance,
    ReconciledCandidate,
)
from memory_server.memory.facts.reconcile import revalidate
from memory_server.memory.identity import Scope
from memory_server.memory.ports import (
    Applying,
    AsOf,
    EventDates,
    FactLink,
    FactStore,
    ScopeExecutor,
)
from memory_server.memory.time.event_time import dated

MANUAL = "manual"


@dataclass(frozen=True, kw_only=True, eq=False)
class FactAdmin:
    store: FactStore
    changes: FactChanges
    executor: ScopeExecutor
    events: EventDates | None = None  # dates named in a hand-added fact ("on 3 May")

    async def add_fact(
        self, scope: Scope, fact: NewFact, timeout_s: float | None = None
    ) -> AppliedChange:
        """Adds the fact unless a live fact has the same normalised text: then that one is
        returned (NONE) and nothing is written, however many servers are asked at once."""
        # Re-checked under the lock against the live facts as the AddFacts before it in its
        # batch left them: the same text twice is stored once, and both get its id.
        [adding] = await self._adding([fact])
        return await self.executor.run_batched(
            scope, "add_fact", adding, lambda batch: self._add_facts(scope, batch, timeout_s)
        )

    async def add_facts(
        self, scope: Scope, facts: Sequence[NewFact], timeout_s: float | None = None
    ) -> list[AppliedChange]:
        """Every fact as `add_fact` would store it, in order, in one transaction on the scope's
        actor: all are stored, or on any error none is. A text equal to a live fact's (or to
        an earlier one of the call) writes nothing and answers that fact's id (NONE)."""
        adding = await self._adding(facts)

        async def job() -> list[AppliedChange]:
            return await self._add_facts(scope, adding, timeout_s)

        return await self.executor.run(scope, job)

    async def _adding(self, facts: Sequence[NewFact]) -> list[Applying]:
        """Hand-added facts, dated, as changes to apply; each is re-checked under the scope's
        lock against the live facts as the changes before it left them."""
        candidates = await dated(
            [Candidate(f.text, f.kind, said_at=f.valid_from) for f in facts], self.events
        )
        out: list[Applying] = []
        for fact, candidate in zip(facts, candidates, strict=True):
            decisions = [ReconciledCandidate(Decision.ADD, candidate)]
            out.append(
                Applying(
                    decisions,
                    Provenance(fact.conversation_id, extractor=MANUAL),
                    functools.partial(revalidate, decisions),
                )
            )
        return out

    async def _add_facts(
        self, scope: Scope, adding: list[Applying], timeout_s: float | None
    ) -> list[AppliedChange]:
        """AddFacts queued back to back on the scope's actor, in one transaction."""
        applied = await self.changes.apply_batch(scope, adding, timeout_s=timeout_s)
        return [one for [one] in applied]

    async def update_fact(
        self,
        scope: Scope,
        fact_id: str,
        text: str,
        kind: FactKind | None,
        timeout_s: float | None = None,
    ) -> AppliedChange:
        async def job() -> AppliedChange:
            current = await self._live_version(scope, fact_id, timeout_s)
            decision = ReconciledCandidate(
                Decision.UPDATE, Candidate(text, kind or current.kind), fact_id
            )
            # A target closed meanwhile (by another server) makes the store answer NotFound.
            [applied] = await self.changes.apply(
                scope, [decision], Provenance(extractor=MANUAL), timeout_s=timeout_s
            )
            return applied

        return await self.executor.run(scope, job)

    async def delete_fact(
        self, scope: Scope, fact_id: str, *, ended: bool, timeout_s: float | None = None
    ) -> None:
        async def job() -> None:
            current = await self._live_version(scope, fact_id, timeout_s)
            decision = ReconciledCandidate(
                Decision.DELETE, Candidate(current.text, current.kind, retraction=True), fact_id
            )
            await self.changes.apply(
                scope, [decision], Provenance(extractor=MANUAL), ended=ended, timeout_s=timeout_s
            )

        await self.executor.run(scope, job)

    async def _live_version(
        self, scope: Scope, fact_id: str, timeout_s: float | None
    ) -> FactVersion:
        versions = await self.store.fact_versions(scope, fact_id, timeout_s=timeout_s)
        live = [v for v in versions if v.superseded_at is None and v.valid_to is None]
        if not live:
            raise NotFound(f"fact_id: fact {fact_id!r} is not live (deleted or superseded)")
        return live[0]

    async def forget_scope(
        self, scope: Scope, *, include_messages: bool, timeout_s: float | None = None
    ) -> dict[str, int]:
        async def job() -> dict[str, int]:
            return await self.changes.forget_scope(
                scope, include_messages=include_messages, timeout_s=timeout_s
            )

        return await self.executor.run(scope, job)

    # --- reads -------------------------------------------------------------------------------

    async def list_facts(
        self, scope: Scope, as_of: AsOf, limit: int, offset: int, timeout_s: float | None = None
    ) -> list[FactVersion]:
        return await self.store.list_facts(scope, as_of, limit, offset, timeout_s=timeout_s)

    async def get_fact(
        self, scope: Scope, fact_id: str, timeout_s: float | None = None
    ) -> list[FactVersion]:
        return await self.store.fact_versions(scope, fact_id, timeout_s=timeout_s)

    async def live_links(
        self, scope: Scope, versions: Sequence[FactVersion], timeout_s: float | None = None
    ) -> list[FactLink]:
        """The live links of the fact's live version (none once it is closed)."""
        live = [v.version_id for v in versions if v.superseded_at is None and v.valid_to is None]
        return await self.store.live_links(scope, live, timeout_s=timeout_s)

    async def history(
        self, scope: Scope, fact_id: str, timeout_s: float | None = None
    ) -> list[HistoryEvent]:
        return await self.store.history(scope, fact_id, timeout_s=timeout_s)
