"""Read your own writes: a search also scores what the outbox has not sent to the index yet.

A fact is committed with its outbox row in one transaction and reaches the vector index a
little later (the outbox batches, embeds and upserts). Until then a search found it on its words
alone, or not at all: AddFact, then SearchFacts at once, answered differently from the same
search a few seconds later. `FreshIndex` is the vector index as recall sees it: beside each
search it reads the scope's versions still waiting in the outbox (believed at the same as-of
point; an index on the outbox by scope finds them), embeds them through the shared pool (whose
cache then serves the outbox the same vectors) and ranks them with the index's hits by the
same cosine. Every replica shares the outbox table, so a write through one server is found at
once through another too. When the outbox is empty, as it is between writes, a search costs
one more small statement, run beside the index's.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence

from memory_server.memory.ports import (
    AsOf,
    Embedder,
    LinkRecord,
    VectorHit,
    VectorIndex,
    VectorRecord,
)
from memory_server.outbox.port import PendingSources

__all__ = ["FreshIndex"]

# At most this many waiting versions of a scope are scored per search: a bulk import waits a
# moment for the outbox rather than being embedded on the search's path.
_MAX_PENDING = 64


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norms = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norms if norms else 0.0


class FreshIndex:
    """`index` for searches, with the outbox's waiting versions scored in; every other call
    goes to `index` as it is."""

    def __init__(self, index: VectorIndex, outbox: PendingSources, embedder: Embedder) -> None:
        self._index = index
        self._outbox = outbox
        self._embedder = embedder

    @property
    def name(self) -> str:
        return self._index.name

    @property
    def index(self) -> VectorIndex:
        """The index searched, without the outbox's waiting versions."""
        return self._index

    async def search(
        self, scope_hash: str, vector: Sequence[float], k: int, as_of: AsOf
    ) -> list[VectorHit]:
        hits, pending = await asyncio.gather(
            self._index.search(scope_hash, vector, k, as_of),
            self._outbox.pending_sources(scope_hash, as_of, _MAX_PENDING),
        )
        seen = {h.version_id for h in hits}
        waiting = [p for p in pending if p.version_id not in seen]
        if not waiting:
            return hits
        vectors = await self._embedder.embed([p.text for p in waiting])
        scored = [
            VectorHit(p.version_id, _cosine(vector, v))
            for p, v in zip(waiting, vectors, strict=True)
        ]
        return sorted([*hits, *scored], key=lambda h: h.cosine, reverse=True)[:k]

    async def upsert(
        self, records: Sequence[VectorRecord], links: Sequence[LinkRecord] = ()
    ) -> None:
        await self._index.upsert(records, links)

    async def neighbours(
        self, scope_hash: str, vectors: Sequence[Sequence[float]], k: int
    ) -> list[list[VectorHit]]:
        return await self._index.neighbours(scope_hash, vectors, k)

    async def delete(self, version_ids: Sequence[str]) -> None:
        await self._index.delete(version_ids)

    async def purge_scope(self, scope_hash: str) -> None:
        await self._index.purge_scope(scope_hash)

    async def count(self, scope_hash: str) -> int:
        return await self._index.count(scope_hash)

    async def vectors(self, scope_hash: str, version_ids: Sequence[str]) -> dict[str, list[float]]:
        return await self._index.vectors(scope_hash, version_ids)
