"""Episodes: what was said, not only what was distilled. Every user and assistant message, as
stored (secrets redacted), is embedded through the outbox under the scope's episode partition
(memory.identity.episode_partition) and searchable within the scope across its conversations.

Search is hybrid as for facts (memory.recall.rank): the index's cosine and the idf-weighted
share of the question's words a message holds, each filtered by the as-of point before ranking
(a message is believed from its created_at until erased), fused by the same probabilistic OR.
PostgreSQL has the last word: a vector whose message was deleted, forgotten or is past
retention is dropped. A turn's context shows the best few (memory.conversation.stm).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from memory_server.memory.conversation.model import RecalledEpisode
from memory_server.memory.identity import Scope, episode_seq
from memory_server.memory.ports import AsOf, Embedder, EpisodeStore, VectorIndex
from memory_server.memory.recall.rank import fuse, lexical_evidence

log = logging.getLogger(__name__)

# Candidates fetched from each signal before fusion (as for facts).
EPISODE_CANDIDATES = 50
# A turn asks for this many more than it shows: its context leaves out the turns already in
# its window and those its recalled facts came from.
_CONTEXT_SLACK = 20


@dataclass(frozen=True, slots=True)
class EpisodeSettings:
    top_k: int  # at most this many in a turn's context
    score_threshold: float  # the least hybrid score a turn's context shows
    context_tokens: int  # the most tokens the context's episode section takes


@dataclass(frozen=True, kw_only=True, eq=False)
class EpisodeRecall:
    store: EpisodeStore
    index: VectorIndex
    embedder: Embedder
    settings: EpisodeSettings

    async def search(
        self,
        scope: Scope,
        query: str,
        *,
        top_k: int,
        threshold: float,
        as_of: AsOf,
        timeout_s: float | None = None,
    ) -> list[RecalledEpisode]:
        """The scope's episodes believed at `as_of` scoring at least `threshold`, best first
        (newest first among equals), at most `top_k`."""
        if not query.strip():
            return []
        vector_task = asyncio.ensure_future(self._cosines(scope, query, as_of))
        try:
            coverages = dict(
                await self.store.episode_lexical(
                    scope, query, EPISODE_CANDIDATES, as_of, timeout_s=timeout_s
                )
            )
        except BaseException:
            vector_task.cancel()
            await asyncio.gather(vector_task, return_exceptions=True)
            raise
        cosines = await vector_task
        seqs = list(dict.fromkeys([*cosines, *coverages]))
        if not seqs:
            return []
        messages = await self.store.episodes(scope, seqs, as_of, timeout_s=timeout_s)
        found = []
        for message in messages:
            vector = max(0.0, cosines.get(message.seq, 0.0))
            lexical = lexical_evidence(coverages.get(message.seq, 0.0))
            score = fuse(vector, lexical)
            if score >= threshold:
                found.append(RecalledEpisode(message, score, vector, lexical))
        found.sort(key=lambda e: (-e.score, -e.message.seq))
        return found[:top_k]

    async def _cosines(self, scope: Scope, query: str, as_of: AsOf) -> dict[int, float]:
        [vector] = await self.embedder.embed([query])
        hits = await self.index.search(scope.episode_partition, vector, EPISODE_CANDIDATES, as_of)
        return {episode_seq(h.version_id): h.cosine for h in hits}

    async def recall(
        self, scope: Scope, question: str, *, timeout_s: float | None = None
    ) -> list[RecalledEpisode]:
        """Candidates for a turn's context (more than it shows: it leaves some out); a
        failure gives none (the turn keeps its facts and short-term memory)."""
        if self.settings.top_k == 0 or self.settings.context_tokens == 0:
            return []
        try:
            return await self.search(
                scope,
                question,
                top_k=self.settings.top_k + _CONTEXT_SLACK,
                threshold=self.settings.score_threshold,
                as_of=AsOf(),
                timeout_s=timeout_s,
            )
        except Exception as exc:
            log.warning("episode recall degraded: %s", type(exc).__name__)
            return []
