"""What the outbox actor needs from the store it drains: claimed rows with the current state
of their versions, and how far the vector index lags behind. PostgresFactStore is the one
adapter; the rows themselves are written by each fact change, in its own transaction."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple, Protocol

from memory_server.memory.ports import AsOf, LinkRecord

__all__ = ["Backlog", "OutboxBatch", "OutboxItem", "OutboxRows", "PendingSources", "VectorSource"]


class Backlog(NamedTuple):
    """The vector index's lag behind PostgreSQL."""

    waiting: int  # outbox rows not yet applied to the index
    oldest_s: float  # seconds the oldest of them has waited; 0 when none


@dataclass(frozen=True, slots=True)
class OutboxItem:
    id: int
    scope_hash: str
    op: str  # upsert | delete | purge
    version_id: str
    attempts: int
    kind: str = "fact"  # fact (a fact version) | episode (a message, migration 0010)


@dataclass(frozen=True, slots=True)
class VectorSource:
    """A version as the vector index needs it."""

    version_id: str
    scope_hash: str
    text: str
    valid_from: datetime
    valid_to: datetime | None
    recorded_at: datetime
    superseded_at: datetime | None
    # A message (its scope_hash is the episode partition): never linked to facts.
    episode: bool = False


class OutboxBatch(Protocol):
    """Claimed rows, held until the claim ends; what is written through it commits with it."""

    @property
    def items(self) -> Sequence[OutboxItem]: ...

    async def sources(self) -> dict[str, VectorSource]:
        """Current state of the versions and episodes to upsert; one erased meanwhile (or an
        episode no longer recallable) is absent."""
        ...

    async def record_links(self, pairs: Sequence[tuple[str, str, float]]) -> list[LinkRecord]:
        """Links (version, version, similarity) between live versions; returns those written."""
        ...

    async def close_links(self, version_ids: Sequence[str]) -> list[LinkRecord]:
        """Closes the links of versions no longer live; returns those closed."""
        ...

    async def done(self) -> None:
        """The index has the batch: its rows leave the outbox."""
        ...

    async def retry(self, error: str, delay_s: float) -> None:
        """The index (or the embedder) failed: the rows are due again after `delay_s`."""
        ...


class OutboxRows(Protocol):
    def claim_outbox(self, limit: int) -> AbstractAsyncContextManager[OutboxBatch]:
        """Up to `limit` due rows, in order, for the duration of the block; another server's
        claim skips them."""
        ...

    async def backlog(self) -> Backlog: ...


class PendingSources(Protocol):
    async def pending_sources(self, scope_hash: str, as_of: AsOf, limit: int) -> list[VectorSource]:
        """A scope's versions believed at `as_of` whose vectors the index does not have yet."""
        ...
