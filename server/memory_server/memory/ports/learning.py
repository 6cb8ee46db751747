"""Learning's ports: the extractor, the event-date resolver and the reconciler."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from memory_server.memory.facts.model import (
    Candidate,
    EventTime,
    LiveFact,
    ReconciledCandidate,
)


@dataclass(frozen=True, slots=True)
class ExtractionInput:
    user_text: str  # already scrubbed
    assistant_text: str  # already scrubbed
    # Facts recall put into this turn's context: never extract them again.
    recalled: Sequence[str] = ()


class Extractor(Protocol):
    """Finds durable user facts (preferences, decisions, goals, identity) in one turn."""

    @property
    def name(self) -> str: ...

    async def extract(self, turn: ExtractionInput) -> list[Candidate]: ...


class EventDates(Protocol):
    """Resolves the time expression of a fact's text ("yesterday", "last week", "in 2022")
    against the time it was said. Synchronous and CPU-bound: callers run it off the loop,
    and only for texts where `needs_resolving` (cheap) is true."""

    def needs_resolving(self, text: str) -> bool: ...

    def resolve(self, text: str, said_at: datetime) -> EventTime | None: ...


class Reconciler(Protocol):
    """Decides ADD / UPDATE / DELETE / NONE for each candidate against the scope's live facts."""

    async def reconcile(
        self,
        candidates: Sequence[Candidate],
        live: Sequence[LiveFact],
        *,
        live_vectors: Mapping[str, Sequence[float]] | None = None,
    ) -> list[ReconciledCandidate]:
        """`live_vectors`: vectors the index already holds, by version id, so that live facts
        need not be embedded again (any missing are embedded)."""
        ...
