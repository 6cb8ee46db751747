"""Writing fact changes: what every change of a scope's facts does besides the store's own
transaction, whoever decided it (learning after a reply, a manual AddFact or UpdateFact,
erasure). Standing instructions are marked, the scope's common words are read again, each
decision is counted, and the outbox is told to mirror the change into the vector index.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from memory_server.memory.facts.model import (
    AppliedChange,
    Decision,
    Provenance,
    ReconciledCandidate,
)
from memory_server.memory.identity import Scope
from memory_server.memory.ports import (
    Applying,
    FactStore,
    IndexOutbox,
    NoOutbox,
    NoTelemetry,
    Revise,
    Telemetry,
)
from memory_server.memory.recall.common_words import CommonWords
from memory_server.memory.recall.rank import is_standing_instruction


def _with_standing(decided: Sequence[ReconciledCandidate]) -> list[ReconciledCandidate]:
    """The decisions with each candidate marked standing when it is a standing instruction."""
    return [
        replace(
            d, candidate=replace(d.candidate, standing=is_standing_instruction(d.candidate.text))
        )
        for d in decided
    ]


def _standing(change: Applying) -> Applying:
    revise = change.revise
    return replace(
        change,
        decisions=_with_standing(change.decisions),
        revise=None if revise is None else lambda live: _with_standing(revise(live)),
    )


@dataclass(frozen=True, kw_only=True, eq=False)
class FactChanges:
    store: FactStore
    common_words: CommonWords
    max_live: int  # max_facts_per_scope: past it the least seen are evicted
    outbox: IndexOutbox = field(default_factory=NoOutbox)
    telemetry: Telemetry = field(default_factory=NoTelemetry)

    async def apply(
        self,
        scope: Scope,
        decisions: Sequence[ReconciledCandidate],
        provenance: Provenance,
        revise: Revise | None = None,
        *,
        ended: bool = True,
        timeout_s: float | None = None,
    ) -> list[AppliedChange]:
        """One change (FactStore.apply_batch of it alone)."""
        [applied] = await self.apply_batch(
            scope, [Applying(decisions, provenance, revise)], ended=ended, timeout_s=timeout_s
        )
        return applied

    async def apply_batch(
        self,
        scope: Scope,
        changes: Sequence[Applying],
        *,
        ended: bool = True,
        timeout_s: float | None = None,
    ) -> list[list[AppliedChange]]:
        """Several changes in one transaction (FactStore.apply_batch)."""
        applied = await self.store.apply_batch(
            scope,
            [_standing(c) for c in changes],
            max_live=self.max_live,
            ended=ended,
            timeout_s=timeout_s,
        )
        self.common_words.forget(scope)
        decisions = [c.decision for each in applied for c in each]
        for decision in decisions:
            self.telemetry.fact_decision(decision.value)
        if any(d is not Decision.NONE for d in decisions):
            self.outbox.facts_changed()
        return applied

    async def forget_scope(
        self, scope: Scope, *, include_messages: bool, timeout_s: float | None = None
    ) -> dict[str, int]:
        """Erasure of the scope's facts (FactStore.forget_scope)."""
        counts = await self.store.forget_scope(
            scope, include_messages=include_messages, timeout_s=timeout_s
        )
        self.common_words.forget(scope)
        self.outbox.facts_changed()
        return counts
