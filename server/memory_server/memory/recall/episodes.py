"""Episodes: what was said, not only what was distilled. Every user and assistant message, as
stored (secrets redacted), is embedded through the outbox under the scope's episode partition
(memory.identity.episode_partition) and searchable within the scope across its conversations.

Search is hybrid as for facts (memory.recall.rank): the index's cosine and the idf-weighted
share of the question's words a message holds, each filtered by the as-of point before ranking
(a message is believed from its created_at until erased), fused by the same probabilistic OR;
the best hits bring in the messages said just before and after them (the exchange). The
user's own name is left out of the question first (`without_own_name`).
PostgreSQL has the last word: a vector whose message was deleted, forgotten or is past
retention is dropped. A turn's context shows the best few (memory.conversation.stm).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass

from memory_server.memory.conversation.model import RecalledEpisode, StoredMessage
from memory_server.memory.identity import Scope, episode_seq
from memory_server.memory.ports import AsOf, Embedder, EpisodeStore, EventDates, VectorIndex
from memory_server.memory.recall.common_words import CommonWords
from memory_server.memory.recall.rank import fuse, lexical_evidence
from memory_server.memory.time.intent import has_time_intent

log = logging.getLogger(__name__)

# Candidates fetched from each signal before fusion (as for facts).
EPISODE_CANDIDATES = 50
# A turn asks for this many more than it shows: its context leaves out the turns already in
# its window and those its recalled facts came from.
_CONTEXT_SLACK = 20


_NAME = re.compile(r"(?<=\S)(\s+)([A-Z][A-Za-z]*)(?:['’]s)?\b")
_USER_PARTS = re.compile(r"[^A-Za-z]+")


def without_own_name(question: str, username: str) -> str:
    """The question without the words that name the user asking it: a word written with a
    capital, not the question's first, that is one of the username's parts (split at anything
    not a letter, three letters or more), with its possessive. A message never names its own
    author (who said it is its role), so "What did Caroline research?" asked in Caroline's
    memory is "What did research?" to the words of her messages; a lower-case word is kept
    ("learn" in "What did Caroline learn?", whatever the username holds)."""
    parts = {p.lower() for p in _USER_PARTS.split(username) if len(p) >= 3}
    if not parts:
        return question

    def drop(found: re.Match[str]) -> str:
        return "" if found[2].lower() in parts else found[0]

    return _NAME.sub(drop, question)


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
    # The vote a message naming a time gets when the question asks about time (as facts get
    # ltm_time_intent_weight); 0: none.
    time_intent_weight: float = 0.0


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
    # Tells a message that names a time ("yesterday", "in May") for the time vote.
    events: EventDates | None = None

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
        query = without_own_name(query, scope.username)
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
        signals = {
            seq: (max(0.0, cosines.get(seq, 0.0)), lexical_evidence(coverages.get(seq, 0.0)))
            for seq in dict.fromkeys([*cosines, *coverages])
        }
        if not signals:
            return []
        # Both signals are known before any text: rank first, then read the best messages and
        # the exchange around them (one statement). A time vote may reorder the best few, so
        # the exchange is read around twice as many.
        ranked = sorted(signals, key=lambda seq: (-fuse(*signals[seq]), -seq))
        wide = ranked[: 2 * self.settings.seeds] if self.settings.neighbour_decay > 0 else []
        # Only the best are read: enough for top_k and the seeds when a few are not believed.
        messages, around = await self.store.episodes(
            scope,
            ranked[: 2 * max(top_k, self.settings.seeds)],
            as_of,
            around=wide,
            timeout_s=timeout_s,
        )
        vote = self._time_vote(query)
        best = {
            m.seq: RecalledEpisode(m, fuse(fuse(*signals[m.seq]), vote(m)), *signals[m.seq])
            for m in messages
        }
        found = sorted(best.values(), key=lambda e: (-e.score, -e.message.seq))
        decay = self.settings.neighbour_decay
        for seed in found[: self.settings.seeds] if decay > 0 else []:
            for message in around.get(seed.message.seq, []):
                score = seed.score * decay
                if message.seq not in best or best[message.seq].score < score:
                    best[message.seq] = RecalledEpisode(message, score)
        found = sorted(best.values(), key=lambda e: (-e.score, -e.message.seq))
        return [e for e in found if e.score >= threshold][:top_k]

    def _time_vote(self, query: str) -> Callable[[StoredMessage], float]:
        """A message that names a time gets `time_intent_weight` when the question asks about
        time ("when", "how long ago"), as a dated fact does (memory.time.intent)."""
        weight, events = self.settings.time_intent_weight, self.events
        if weight <= 0 or events is None or not has_time_intent(query):
            return lambda message: 0.0
        return lambda message: weight if events.needs_resolving(message.content) else 0.0

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
