"""Episodes' port: a scope's messages as long-term memory (memory.recall.episodes). The
PostgreSQL conversation store implements it; their vectors are in the VectorIndex, under the
scope's episode partition (memory.identity.episode_partition)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple, Protocol

from memory_server.memory.conversation.model import StoredMessage
from memory_server.memory.identity import Scope
from memory_server.memory.ports.index import AsOf


class Episodes(NamedTuple):
    messages: list[StoredMessage]
    neighbours: dict[int, list[StoredMessage]]  # by the seq of the message they surround


class EpisodeStore(Protocol):
    async def episode_lexical(
        self, scope: Scope, query: str, k: int, as_of: AsOf, *, timeout_s: float | None = None
    ) -> list[tuple[int, float]]:
        """(seq, idf-weighted share of the query's words) of the scope's episodes believed at
        `as_of` that share words with it, best first, at most `k`."""
        ...

    async def episodes(
        self,
        scope: Scope,
        seqs: Sequence[int],
        as_of: AsOf,
        *,
        around: Sequence[int] = (),
        timeout_s: float | None = None,
    ) -> Episodes:
        """Those of the messages that are episodes of the scope believed at `as_of` (said and
        stored by then, still recallable), and for each of `around`, the episodes said just
        before and just after it in its conversation."""
        ...

    async def expire_episodes(self, cutoff: datetime, limit: int = 10_000) -> int:
        """Messages said before `cutoff` stop being episodes (their rows stay); how many."""
        ...
