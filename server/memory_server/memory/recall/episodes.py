"""Episodes: what was said, not only what was distilled. Every user and assistant message, as
stored (secrets redacted), is embedded through the outbox under the scope's episode partition
(memory.identity.episode_partition) and searchable within the scope across its conversations.

Search is hybrid as for facts (memory.recall.rank): the index's cosine and the idf-weighted
share of the question's words a message holds, each filtered by the as-of point before ranking
(a message is believed from its created_at until erased), fused by the same probabilistic OR;
the best hits bring in the messages said just before and after them (the exchange).
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
from memory_server.memory.recall.common_words import CommonWords
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
    # The exchange around a hit: each of the `seeds` best brings in the messages said just
    # before and after it in its conversation, at its score * `neighbour_decay` (0: none), as
    # facts bring in their neighbours (ltm_neighbour_decay, ltm_link_seeds).
    neighbour_decay: float = 0.0
    seeds: int = 0


@dataclass(frozen=True, kw_only=True, eq=False)
class EpisodeRecall:
    store: EpisodeStore
    index: VectorIndex
    embedder: Embedder
    settings: EpisodeSettings
    # The question is embedded without the scope's common words, as fact recall embeds it: a
    # turn's two recalls then share one embedding (memory.recall.shared_vectors).
    common_words: CommonWords | None = None
    # The index SearchEpisodes uses: it also scores messages still waiting in the outbox
    # (outbox.fresh). A turn's context does without: the newest messages of its conversation
    # are in its window anyway, and scoring the waiting ones costs their embeddings.
    fresh_index: VectorIndex | None = None

    async def search(
        self,
        scope: Scope,
        query: str,
        *,
        top_k: int,
        threshold: float,
        as_of: AsOf,
        fresh: bool = False,
        timeout_s: float | None = None,
    ) -> list[RecalledEpisode]:
        """The scope's episodes believed at `as_of` scoring at least `threshold`, best first
        (newest first among equals), at most `top_k`; with `fresh`, those still waiting in the
        outbox too."""
        if not query.strip():
            return []
        index = (self.fresh_index or self.index) if fresh else self.index
        vector_task = asyncio.ensure_future(self._cosines(index, scope, query, as_of, timeout_s))
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
        # Both signals are known before any text: rank first, then read the messages and the
        # exchange around the best (both statements at once).
        signals = {
            seq: (v, w, fuse(v, w))
            for seq in dict.fromkeys([*cosines, *coverages])
            for v, w in [
                (max(0.0, cosines.get(seq, 0.0)), lexical_evidence(coverages.get(seq, 0.0)))
            ]
        }
        if not signals:
            return []
        ranked = sorted(signals, key=lambda seq: (-signals[seq][2], -seq))
        seeds = ranked[: self.settings.seeds] if self.settings.neighbour_decay > 0 else []
        messages, around = await asyncio.gather(
            self.store.episodes(scope, ranked, as_of, timeout_s=timeout_s),
            self.store.episode_neighbours(scope, seeds, as_of, timeout_s=timeout_s),
        )
        best = {m.seq: RecalledEpisode(m, signals[m.seq][2], *signals[m.seq][:2]) for m in messages}
        for seed in seeds:
            if seed not in best:  # not believed (erased meanwhile): it brings nothing in
                continue
            score = best[seed].score * self.settings.neighbour_decay
            for message in around.get(seed, []):
                if message.seq not in best or best[message.seq].score < score:
                    best[message.seq] = RecalledEpisode(message, score)
        found = sorted(best.values(), key=lambda e: (-e.score, -e.message.seq))
        return [e for e in found if e.score >= threshold][:top_k]

    async def _cosines(
        self, index: VectorIndex, scope: Scope, query: str, as_of: AsOf, timeout_s: float | None
    ) -> dict[int, float]:
        text = query
        if self.common_words is not None:
            text = (await self.common_words.question(scope, query, as_of, timeout_s)).text
        [vector] = await self.embedder.embed([text])
        hits = await index.search(scope.episode_partition, vector, EPISODE_CANDIDATES, as_of)
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
