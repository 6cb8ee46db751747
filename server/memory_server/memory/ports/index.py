"""The vector side: the embedder and the vector index (TigerGraph or pgvector), with the
records they exchange."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


class Embedder(Protocol):
    """Text → unit-length vectors. The shared embedding pool implements it for all scopes."""

    @property
    def model_name(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    async def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


@dataclass(frozen=True, slots=True)
class AsOf:
    """A bitemporal point; None means now. `AsOf()` selects exactly the live versions."""

    valid_time: datetime | None = None
    transaction_time: datetime | None = None


@dataclass(frozen=True, slots=True)
class VectorRecord:
    """What the index keeps per fact version: the vector and what pre-filtering needs."""

    version_id: str
    scope_hash: str
    vector: Sequence[float]
    valid_from: datetime
    valid_to: datetime | None
    recorded_at: datetime
    superseded_at: datetime | None


@dataclass(frozen=True, slots=True)
class VectorHit:
    version_id: str
    cosine: float  # in [-1, 1]


@dataclass(frozen=True, slots=True)
class LinkRecord:
    """A semantic link between two versions of one scope, with its transaction interval, as
    an index that mirrors links as edges (TigerGraph) keeps it."""

    source_version_id: str
    target_version_id: str
    score: float  # cosine of the two vectors
    recorded_at: datetime
    superseded_at: datetime | None


class VectorIndex(Protocol):
    """Per-version vectors partitioned by scope_hash. Upserts and deletes are idempotent by
    version id. Search filters by scope and by the as-of point *before* ranking."""

    @property
    def name(self) -> str: ...

    async def upsert(
        self, records: Sequence[VectorRecord], links: Sequence[LinkRecord] = ()
    ) -> None:
        """Upserts the records and, in the same request where the index keeps links (as
        edges), the links; an index without edges ignores `links` (PostgreSQL has them)."""
        ...

    async def neighbours(
        self, scope_hash: str, vectors: Sequence[Sequence[float]], k: int
    ) -> list[list[VectorHit]]:
        """For each vector, its at most `k` most similar versions of the scope that are live
        (current in both times) in the index, best first."""
        ...

    async def delete(self, version_ids: Sequence[str]) -> None: ...

    async def purge_scope(self, scope_hash: str) -> None: ...

    async def search(
        self, scope_hash: str, vector: Sequence[float], k: int, as_of: AsOf
    ) -> list[VectorHit]: ...

    async def count(self, scope_hash: str) -> int: ...

    async def vectors(self, scope_hash: str, version_ids: Sequence[str]) -> dict[str, list[float]]:
        """The stored vectors of these versions of the scope (absent ones, and any of another
        scope, are left out): a statement of one scope, as every other (README "Scale-out")."""
        ...


class IndexOutbox(Protocol):
    """What mirrors committed fact changes into the vector index (the outbox actor)."""

    def facts_changed(self) -> None:
        """Fact changes (and their outbox rows) were committed: mirror them now instead of at
        the next poll."""
        ...


class NoOutbox:
    """The default when nothing mirrors changes into an index (a test's domain alone)."""

    def facts_changed(self) -> None:
        pass
