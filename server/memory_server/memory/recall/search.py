"""Recall: the facts of a scope that a question needs, for a turn's context and for SearchFacts.

A read: it runs beside the scope's actor, never on it. Both signals (the index's cosine and the
store's lexical coverage) filter by the as-of point before anyone ranks them; PostgreSQL has
the last word on what is believed, so a vector whose version is no longer believed is dropped.
Every store call gets what is left of the caller's deadline (`timeout_s`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from memory_server.memory.conversation.model import LongTermSection, RecalledFact
from memory_server.memory.facts.model import FactVersion
from memory_server.memory.identity import Scope
from memory_server.memory.ports import (
    AsOf,
    Embedder,
    EventDates,
    FactStore,
    QuestionSplitter,
    VectorIndex,
)
from memory_server.memory.recall import split
from memory_server.memory.recall.common_words import CommonWords, VectorQuestion, subject_weight
from memory_server.memory.recall.expand import ExpandSettings, expand, seeds
from memory_server.memory.recall.rank import ScoredFact, rank
from memory_server.memory.recall.second_hop import HopSettings, bridges, hop_question, merge
from memory_server.memory.recall.seen import SeenRecorder
from memory_server.memory.time.event_time import asked_when
from memory_server.memory.time.intent import dated_vote

log = logging.getLogger(__name__)
A = TypeVar("A")
B = TypeVar("B")

# Candidates fetched from each signal before fusion: enough that the fused top-k is stable.
CANDIDATES_PER_SIGNAL = 50


@dataclass(frozen=True, slots=True)
class RecallSettings:
    top_k: int
    score_threshold: float
    expansion: ExpandSettings = ExpandSettings()
    # The vote a dated fact gets when the question asks about time (memory.time.intent).
    time_intent_weight: float = 0.0
    # What a fact that names none of the question's subjects (its common words written with a
    # capital, memory.recall.common_words) is weighed by; 1 weighs every fact alike.
    off_subject_weight: float = 1.0
    # A second search with the question joined to its best hits' text
    # (memory.recall.second_hop); weight 0 turns it off.
    second_hop: HopSettings = HopSettings()


async def _both(first: Awaitable[A], second: Awaitable[B]) -> tuple[A, B]:
    """Both results; if either fails, the other is cancelled (and awaited) and the error
    propagates."""
    a = asyncio.ensure_future(first)
    b = asyncio.ensure_future(second)
    try:
        return await a, await b
    except BaseException:
        for task in (a, b):
            task.cancel()
        await asyncio.gather(a, b, return_exceptions=True)
        raise


def recalled(version: FactVersion, score: float, *, standing: bool = False) -> RecalledFact:
    return RecalledFact(
        version.fact_id,
        version.text,
        score,
        standing,
        version.valid_from,
        version.event,
        version.conversation_id,
        version.message_id,
    )


@dataclass(frozen=True, kw_only=True, eq=False)
class Recall:
    store: FactStore
    index: VectorIndex
    embedder: Embedder
    common_words: CommonWords
    settings: RecallSettings
    # The date a question names ("in March 2023"), resolved beside the search.
    events: EventDates | None = None
    # Recall notes what it handed back; a background flush counts it (memory.recall.seen).
    seen: SeenRecorder | None = None
    # Follow-up questions for what the first search could not find (memory.recall.split).
    splitter: QuestionSplitter | None = None

    async def search(
        self,
        scope: Scope,
        query: str,
        *,
        top_k: int,
        threshold: float,
        as_of: AsOf,
        timeout_s: float | None = None,
    ) -> list[ScoredFact]:
        """Hybrid search within the scope; both signals filter by `as_of` before ranking."""
        (cosines, coverages, vector_question), asked = await _both(
            self._signals(scope, query, as_of, timeout_s), asked_when(query, self.events)
        )
        weight = self._subject_weight(vector_question.subjects)
        vote = dated_vote(query, self.settings.time_intent_weight, asked)

        async def ranked_by(
            cosines: dict[str, float], coverages: dict[str, float]
        ) -> list[ScoredFact]:
            return await self._ranked(
                scope, cosines, coverages, as_of, threshold, vote, weight, timeout_s
            )

        ranked = await ranked_by(cosines, coverages)
        hop = self.settings.second_hop
        hops: list[tuple[ScoredFact, list[ScoredFact]]] = []
        # One bridge after another: at most `hop.bridges` searches, each with the caller's
        # deadline.
        for bridge in bridges(ranked, hop):
            again = hop_question(query, bridge.version)
            hop_cosines, hop_coverages, _ = await self._signals(scope, again, as_of, timeout_s)
            hops.append((bridge, await ranked_by(hop_cosines, hop_coverages)))
        if hops:
            ranked = merge(ranked, hops, hop, threshold=threshold)
        if self.splitter is not None:
            known = [s.version.text for s in ranked[: split.CONTEXT]]
            followups = await self.splitter.split(query, known)
            parts = await asyncio.gather(
                *(self._signals(scope, q, as_of, timeout_s) for q in followups)
            )
            found = await asyncio.gather(*(ranked_by(c, v) for c, v, _ in parts))
            ranked = split.merge_parts(ranked, found, threshold=threshold)
        return await self._expand(scope, ranked, top_k, threshold, as_of, weight, timeout_s)

    async def _signals(
        self, scope: Scope, text: str, as_of: AsOf, timeout_s: float | None
    ) -> tuple[dict[str, float], dict[str, float], VectorQuestion]:
        """Both signals' candidates for `text` (cosine and coverage by version id), and what
        the vector signal embedded."""
        (cosines, vector_question), coverages = await _both(
            self._vector_hits(scope, text, as_of, timeout_s),
            self.store.lexical(scope, text, CANDIDATES_PER_SIGNAL, as_of, timeout_s=timeout_s),
        )
        return cosines, dict(coverages), vector_question

    async def _ranked(
        self,
        scope: Scope,
        cosines: dict[str, float],
        coverages: dict[str, float],
        as_of: AsOf,
        threshold: float,
        vote: Callable[[FactVersion], float] | None,
        weight: Callable[[FactVersion], float] | None,
        timeout_s: float | None,
    ) -> list[ScoredFact]:
        ids = list(dict.fromkeys([*cosines, *coverages]))
        if not ids:
            return []
        # PostgreSQL is the truth: a vector whose version is not believed at `as_of` any
        # more (the index lags the outbox) is dropped here.
        believed = await self.store.versions(scope, ids, as_of, timeout_s=timeout_s)
        return rank(
            {v.version_id: v for v in believed},
            cosines,
            coverages,
            top_k=None,
            threshold=threshold,
            extra_vote=vote,
            weight=weight,
        )

    def _subject_weight(self, subjects: Sequence[str]) -> Callable[[FactVersion], float] | None:
        """A version's weight by the question's subjects (memory.recall.common_words)."""
        of_text = subject_weight(subjects, self.settings.off_subject_weight)
        return None if of_text is None else lambda version: of_text(version.text)

    async def _expand(
        self,
        scope: Scope,
        ranked: list[ScoredFact],
        top_k: int,
        threshold: float,
        as_of: AsOf,
        weight: Callable[[FactVersion], float] | None,
        timeout_s: float | None,
    ) -> list[ScoredFact]:
        """What recall adds after ranking: one hop along links (memory.recall.expand), one
        more query, only when the best hits have any."""
        expansion = self.settings.expansion
        followed = seeds(ranked, expansion)
        if not followed:
            return ranked[:top_k]
        linked = await self.store.linked(
            scope, followed, as_of, neighbours=expansion.neighbours, timeout_s=timeout_s
        )
        return expand(ranked, linked, expansion, top_k=top_k, threshold=threshold, weight=weight)

    async def _vector_hits(
        self, scope: Scope, query: str, as_of: AsOf, timeout_s: float | None
    ) -> tuple[dict[str, float], VectorQuestion]:
        vector_question = await self.common_words.question(scope, query, as_of, timeout_s)
        [vector] = await self.embedder.embed([vector_question.text])
        hits = await self.index.search(scope.scope_hash, vector, CANDIDATES_PER_SIGNAL, as_of)
        return {h.version_id: h.cosine for h in hits}, vector_question

    async def recall(
        self, scope: Scope, question: str, *, seen: bool = True, timeout_s: float | None = None
    ) -> LongTermSection:
        """The long-term section of a turn (`seen`: the facts count as used, for retention).
        Callers skip it for scopes without live facts. Failures degrade to an empty section."""
        if not question.strip():
            return LongTermSection()
        top_k = self.settings.top_k
        try:
            # Both at once: the standing instructions do not depend on the question.
            standing, found = await _both(
                self.store.standing(scope, top_k, timeout_s=timeout_s),
                self.search(
                    scope,
                    question,
                    top_k=CANDIDATES_PER_SIGNAL,
                    threshold=0.0,
                    as_of=AsOf(),
                    timeout_s=timeout_s,
                ),
            )
        except Exception as exc:
            log.warning("long-term recall degraded: %s", type(exc).__name__)
            return LongTermSection(
                degraded_reason=f"long-term memory unavailable ({type(exc).__name__})"
            )
        scores = {s.version.version_id: s.score for s in found}
        relevant = [s for s in found if s.score >= self.settings.score_threshold][:top_k]
        # Standing instructions first (they shape every answer), then what the question
        # brings up, each kind at most top_k.
        facts = [recalled(v, scores.get(v.version_id, 0.0), standing=True) for v in standing]
        shown = {v.version_id for v in standing}
        facts += [
            recalled(s.version, s.score) for s in relevant if s.version.version_id not in shown
        ]
        if seen and self.seen is not None:
            self.seen.record(f.fact_id for f in facts)
        return LongTermSection(facts)
