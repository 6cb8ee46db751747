"""The fact store: bitemporal versions, links between facts, and the scope's writes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from memory_server.memory.facts.model import (
    AppliedChange,
    FactVersion,
    HistoryEvent,
    LiveFact,
    Provenance,
    ReconciledCandidate,
)
from memory_server.memory.identity import Scope
from memory_server.memory.ports.index import AsOf


@dataclass(frozen=True, slots=True)
class LinkedVersion:
    """A version reached by following one link from `from_version_id`, or (`neighbour`) said
    just before or after it in the same conversation (score 1)."""

    from_version_id: str
    version: FactVersion
    score: float
    neighbour: bool = False


@dataclass(frozen=True, slots=True)
class FactLink:
    """One end's view of a live link: the version it points at."""

    version_id: str  # the version whose link this is
    linked_fact_id: str
    linked_version_id: str
    score: float
    recorded_at: datetime


# Re-checks reconciliation decisions against the live facts as they are when they are applied
# (see FactStore.apply_batch); it runs while the scope's other writers wait, so it must be quick.


Revise = Callable[[Sequence[LiveFact]], Sequence[ReconciledCandidate]]


@dataclass(frozen=True, slots=True)
class Applying:
    """One change for FactStore.apply_batch: decisions, their provenance and their re-check."""

    decisions: Sequence[ReconciledCandidate]
    provenance: Provenance
    revise: Revise | None = None


class FactStore(Protocol):
    """Facts of one scope at a time: bitemporal versions, history, and (inside `apply` and
    `forget_scope`) the outbox rows that mirror each change into the vector index.

    Every write holds the scope's write lock for its transaction, so writes of one scope are
    serialized even when several servers share the store. Every call of a request takes what
    is left of its deadline (`timeout_s`; None: no limit but the pool's own), for the wait for
    a connection and for each statement."""

    async def live_facts(
        self, scope: Scope, *, timeout_s: float | None = None
    ) -> list[LiveFact]: ...

    async def versions(
        self,
        scope: Scope,
        version_ids: Sequence[str],
        as_of: AsOf,
        *,
        timeout_s: float | None = None,
    ) -> list[FactVersion]: ...

    async def standing(
        self, scope: Scope, limit: int, *, timeout_s: float | None = None
    ) -> list[FactVersion]: ...

    async def lexical(
        self, scope: Scope, query: str, k: int, as_of: AsOf, *, timeout_s: float | None = None
    ) -> list[tuple[str, float]]: ...

    async def common_lexemes(
        self,
        scope: Scope,
        share: float,
        at_least: int,
        as_of: AsOf,
        *,
        timeout_s: float | None = None,
    ) -> set[str]:
        """The stemmed words that more than `share` of the scope's versions believed at
        `as_of`, and at least `at_least` of them, contain."""
        ...

    async def lexemes_of(
        self, words: Sequence[str], *, timeout_s: float | None = None
    ) -> dict[str, list[str]]:
        """Each word's lexemes as `lexical` stems them."""
        ...

    async def list_facts(
        self,
        scope: Scope,
        as_of: AsOf,
        limit: int,
        offset: int,
        *,
        timeout_s: float | None = None,
    ) -> list[FactVersion]: ...

    async def fact_versions(
        self, scope: Scope, fact_id: str, *, timeout_s: float | None = None
    ) -> list[FactVersion]: ...

    async def history(
        self, scope: Scope, fact_id: str, *, timeout_s: float | None = None
    ) -> list[HistoryEvent]: ...

    async def apply_batch(
        self,
        scope: Scope,
        changes: Sequence[Applying],
        *,
        max_live: int,
        ended: bool = True,
        timeout_s: float | None = None,
    ) -> list[list[AppliedChange]]:
        """Applies each change's decisions in turn, all in one transaction under one hold of
        the scope's write lock, and answers each change's applied list. With a change's
        `revise`, the decisions applied are what it returns for the live facts as the changes
        before it left them, read under the lock (the decisions were made against an earlier
        read, before another writer of the scope may have committed); if it raises, or any
        change fails, nothing is written and the error propagates."""
        ...

    async def forget_scope(
        self, scope: Scope, *, include_messages: bool, timeout_s: float | None = None
    ) -> dict[str, int]: ...

    async def linked(
        self,
        scope: Scope,
        version_ids: Sequence[str],
        as_of: AsOf,
        *,
        neighbours: bool = False,
        timeout_s: float | None = None,
    ) -> list[LinkedVersion]:
        """One query: the versions linked to any of `version_ids` by a link believed at
        `as_of`'s transaction time and, with `neighbours`, the versions of each one's
        conversation said just before and just after it; each believed itself at `as_of`
        (filtered before anyone ranks them)."""
        ...

    async def live_links(
        self, scope: Scope, version_ids: Sequence[str], *, timeout_s: float | None = None
    ) -> list[FactLink]:
        """The live links of these versions (both ends live), best first."""
        ...

    async def stale_scopes(self, cutoff: datetime) -> list[Scope]: ...

    async def expire(self, scope: Scope, cutoff: datetime) -> int: ...

    async def purge_expired(self, cutoff: datetime) -> int: ...
