"""Use cases of long-term memory: recall into a turn, learning after a reply, fact search and
the manual fact operations.

Recall is a read and runs beside the actor. Learning (scrub → extract → reconcile → apply) and
every manual change run on the scope's actor, so concurrent turns of one user in one server
never decide against a stale view. Servers sharing the database are another matter: each apply
runs under the scope's write lock and first checks that the live facts are still the ones the
decisions were made against (see `learn`), so two servers never write duplicates either.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TypeVar

from memory_server.memory.background import finish_or_cancel
from memory_server.memory.conversation.model import LongTermSection, RecalledFact
from memory_server.memory.errors import NotFound, Unavailable
from memory_server.memory.facts.model import (
    AppliedChange,
    Candidate,
    Decision,
    FactKind,
    FactVersion,
    HistoryEvent,
    LiveFact,
    NewFact,
    Provenance,
    ReconciledCandidate,
)
from memory_server.memory.facts.reconcile import LiveFactsChanged, revalidate, revision
from memory_server.memory.identity import Scope
from memory_server.memory.ports import (
    Applying,
    AsOf,
    Embedder,
    EventDates,
    ExtractionInput,
    Extractor,
    FactLink,
    FactStore,
    NoTelemetry,
    Reconciler,
    Revise,
    ScopeExecutor,
    Scrubbed,
    SecretFilter,
    Telemetry,
    VectorIndex,
)
from memory_server.memory.recall.common_words import CommonWords, VectorQuestion, subject_weight
from memory_server.memory.recall.expand import ExpandSettings, expand, seeds
from memory_server.memory.recall.rank import ScoredFact, is_standing_instruction, rank
from memory_server.memory.recall.seen import SeenRecorder
from memory_server.memory.time.event_time import asked_when, dated, said_when
from memory_server.memory.time.intent import dated_vote

log = logging.getLogger(__name__)
A = TypeVar("A")
B = TypeVar("B")

# Back-off of background learning while the database is unavailable (about 15 s in all).
_LEARN_RETRY_DELAYS_S = (0.5, 1.0, 2.0, 4.0, 8.0)

# Candidates fetched from each signal before fusion: enough that the fused top-k is stable.
_CANDIDATES_PER_SIGNAL = 50
MANUAL = "manual"
# Reconciliations of one turn when other servers keep changing the scope's facts meanwhile;
# the last one's decisions are applied after only the cheap re-check (reconcile.revalidate).
_RECONCILE_TRIES = 3


@dataclass(frozen=True, slots=True)
class LtmSettings:
    top_k: int
    score_threshold: float
    max_facts_per_scope: int
    expansion: ExpandSettings = ExpandSettings()
    # The vote a dated fact gets when the question asks about time (memory.time.intent).
    time_intent_weight: float = 0.0
    # A question's words that more than this share of the scope's facts contain are left out
    # of what the vector signal embeds (memory.recall.common_words); 0 embeds the question whole.
    common_word_share: float = 0.0
    # What a fact that names none of the question's subjects (its common words written with a
    # capital, memory.recall.common_words) is weighed by; 1 weighs every fact alike.
    off_subject_weight: float = 1.0


@dataclass(frozen=True, slots=True)
class LearnInput:
    scope: Scope
    conversation_id: str
    user_message_id: str
    user_text: str
    assistant_text: str
    # When the user said it (the stored message's created_at; an import keeps the original):
    # what is learned is valid from then, and "yesterday" in it is the day before.
    said_at: datetime | None = None


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


def _with_standing(decided: Sequence[ReconciledCandidate]) -> list[ReconciledCandidate]:
    """The decisions with each candidate marked standing when it is a standing instruction."""
    return [
        replace(
            d, candidate=replace(d.candidate, standing=is_standing_instruction(d.candidate.text))
        )
        for d in decided
    ]


def _standing(change: Applying) -> Applying:
    revise = change.revise
    return replace(
        change,
        decisions=_with_standing(change.decisions),
        revise=None if revise is None else lambda live: _with_standing(revise(live)),
    )


def recalled(version: FactVersion, score: float, *, standing: bool = False) -> RecalledFact:
    return RecalledFact(
        version.fact_id, version.text, score, standing, version.valid_from, version.event
    )


class LongTermMemory:
    def __init__(
        self,
        *,
        store: FactStore,
        index: VectorIndex,
        embedder: Embedder,
        extractor: Extractor,
        reconciler: Reconciler,
        secrets: SecretFilter,
        executor: ScopeExecutor,
        settings: LtmSettings,
        on_change: Callable[[], None] = lambda: None,
        fallback_extractor: Extractor | None = None,
        telemetry: Telemetry | None = None,
        events: EventDates | None = None,
        seen: SeenRecorder | None = None,
    ) -> None:
        self._store = store
        # Recall notes what it handed back; a background flush counts it (memory.recall.seen).
        self._seen = seen
        self._events = events
        self._telemetry = telemetry or NoTelemetry()
        self._fallback_extractor = fallback_extractor
        self._index = index
        self.live_vectors_missing = 0  # live facts whose vector the index did not return
        self._embedder = embedder
        self._extractor = extractor
        self._reconciler = reconciler
        self._secrets = secrets
        self._executor = executor
        self._settings = settings
        self._expansion = settings.expansion
        self._common_words = CommonWords(store, settings.common_word_share)
        self._on_change = on_change
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False

    # --- recall ------------------------------------------------------------------------------

    async def search(
        self,
        scope: Scope,
        query: str,
        *,
        top_k: int,
        threshold: float,
        as_of: AsOf,
    ) -> list[ScoredFact]:
        """Hybrid search within the scope; both signals filter by `as_of` before ranking."""
        vector_task = asyncio.ensure_future(self._vector_hits(scope, query, as_of))
        # The date the question names, if any ("in March 2023"), resolved beside the search.
        asked_task = asyncio.ensure_future(asked_when(query, self._events))
        try:
            coverages = dict(await self._store.lexical(scope, query, _CANDIDATES_PER_SIGNAL, as_of))
        except BaseException:
            for task in (vector_task, asked_task):
                task.cancel()
            await asyncio.gather(vector_task, asked_task, return_exceptions=True)
            raise
        cosines, vector_question = await vector_task
        asked = await asked_task
        ids = list(dict.fromkeys([*cosines, *coverages]))
        if not ids:
            return []
        # PostgreSQL is the truth: a vector whose version is not believed at `as_of` any
        # more (the index lags the outbox) is dropped here.
        versions = {v.version_id: v for v in await self._store.versions(scope, ids, as_of)}
        weight = self._subject_weight(vector_question.subjects)
        ranked = rank(
            versions,
            cosines,
            coverages,
            top_k=None,
            threshold=threshold,
            extra_vote=dated_vote(query, self._settings.time_intent_weight, asked),
            weight=weight,
        )
        return await self._expand(
            scope, ranked, top_k=top_k, threshold=threshold, as_of=as_of, weight=weight
        )

    def _subject_weight(self, subjects: Sequence[str]) -> Callable[[FactVersion], float] | None:
        """A version's weight by the question's subjects (memory.recall.common_words)."""
        of_text = subject_weight(subjects, self._settings.off_subject_weight)
        return None if of_text is None else lambda version: of_text(version.text)

    async def _expand(
        self,
        scope: Scope,
        ranked: list[ScoredFact],
        *,
        top_k: int,
        threshold: float,
        as_of: AsOf,
        weight: Callable[[FactVersion], float] | None = None,
    ) -> list[ScoredFact]:
        """The hook for what recall adds after ranking: one hop along links (memory.recall.expand),
        one more query, only when the best hits have any."""
        followed = seeds(ranked, self._expansion)
        if not followed:
            return ranked[:top_k]
        linked = await self._store.linked(
            scope, followed, as_of, neighbours=self._expansion.neighbours
        )
        return expand(
            ranked, linked, self._expansion, top_k=top_k, threshold=threshold, weight=weight
        )

    async def _vector_hits(
        self, scope: Scope, query: str, as_of: AsOf
    ) -> tuple[dict[str, float], VectorQuestion]:
        vector_question = await self._common_words.question(scope, query, as_of)
        [vector] = await self._embedder.embed([vector_question.text])
        hits = await self._index.search(scope.scope_hash, vector, _CANDIDATES_PER_SIGNAL, as_of)
        return {h.version_id: h.cosine for h in hits}, vector_question

    async def recall(self, scope: Scope, question: str, *, seen: bool = True) -> LongTermSection:
        """The LTM section of a turn (`seen`: the facts count as used, for retention). Callers
        skip it for scopes without live facts. Failures degrade to an empty section."""
        if not question.strip():
            return LongTermSection()
        top_k = self._settings.top_k
        try:
            # Both at once: the standing instructions do not depend on the question.
            standing, found = await _both(
                self._store.standing(scope, top_k),
                self.search(
                    scope, question, top_k=_CANDIDATES_PER_SIGNAL, threshold=0.0, as_of=AsOf()
                ),
            )
        except Exception as exc:
            log.warning("long-term recall degraded: %s", type(exc).__name__)
            return LongTermSection(
                degraded_reason=f"long-term memory unavailable ({type(exc).__name__})"
            )
        scores = {s.version.version_id: s.score for s in found}
        relevant = [s for s in found if s.score >= self._settings.score_threshold][:top_k]
        # Standing instructions first (they shape every answer), then what the question
        # brings up, each kind at most top_k.
        facts = [recalled(v, scores.get(v.version_id, 0.0), standing=True) for v in standing]
        shown = {v.version_id for v in standing}
        facts += [
            recalled(s.version, s.score) for s in relevant if s.version.version_id not in shown
        ]
        if seen and self._seen is not None:
            self._seen.record(f.fact_id for f in facts)
        return LongTermSection(facts)

    # --- learning ----------------------------------------------------------------------------

    async def learn(self, turn: LearnInput) -> list[AppliedChange]:
        """Scrub and extract beside the actor (an LLM call may take seconds, and the user's
        next write must not wait for it), then reconcile and apply on the scope's actor,
        against the live facts as they are at that moment.

        Reconciliation embeds (or asks an LLM), so it runs before the scope's write lock is
        taken; another server may commit facts of the scope meanwhile. The apply therefore
        re-reads the live facts under the lock and, if they changed, writes nothing and this
        reconciles again against the new ones."""
        extracted = await self._extract(turn)
        if extracted is None:
            return []
        candidates, extractor_name = extracted
        candidates = await said_when(candidates, turn.said_at, self._events)
        provenance = Provenance(turn.conversation_id, turn.user_message_id, extractor_name)

        async def job() -> list[AppliedChange]:
            tries = 1
            while True:
                live = await self._store.live_facts(turn.scope)
                decisions = await self._reconciler.reconcile(
                    candidates, live, live_vectors=await self._known_vectors(live)
                )
                revise = revision(live, decisions, last=tries == _RECONCILE_TRIES)
                try:
                    return await self._apply(turn.scope, decisions, provenance, revise)
                except LiveFactsChanged:
                    log.debug("facts changed by another writer; reconciling again")
                    tries += 1

        return await self._executor.run(turn.scope, job)

    @property
    def learning_pending(self) -> int:
        """Background learning tasks not finished yet (0: every accepted turn is learned)."""
        return len(self._tasks)

    def learn_soon(self, turn: Callable[[], Awaitable[LearnInput | None]]) -> None:
        """Learning in the background (fact_extract_async) from the turn that `turn` looks
        up; the task is owned and awaited on close."""
        if self._closed:
            return

        async def run() -> None:
            began = time.perf_counter()
            try:
                await attempts()
            finally:
                self._telemetry.learned(time.perf_counter() - began)

        async def attempts() -> None:
            # A database fault (a restart, a dropped connection) is retried: the turn is
            # stored, and learning from it again is safe (what was applied is NONE now).
            for delay_s in (*_LEARN_RETRY_DELAYS_S, None):
                try:
                    found = await turn()
                    if found is not None:
                        await self.learn(found)
                    return
                except Unavailable as exc:
                    if delay_s is None or self._closed:
                        log.warning("background fact extraction gave up: %s", exc)
                        return
                    log.info("background fact extraction retries in %.1fs: %s", delay_s, exc)
                    await asyncio.sleep(delay_s)
                except Exception:
                    log.exception("background fact extraction failed")
                    return

        task = asyncio.create_task(run(), name="learn")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _scrub_both(self, turn: LearnInput) -> tuple[Scrubbed, Scrubbed]:
        return self._secrets.scrub(turn.user_text), self._secrets.scrub(turn.assistant_text)

    async def _extract(self, turn: LearnInput) -> tuple[list[Candidate], str] | None:
        """(candidates, extractor name), or None when the turn holds nothing to learn."""
        # A worker thread: a long turn's scan is pure CPU (and may go to the filter's process).
        user, assistant = await asyncio.to_thread(self._scrub_both, turn)
        found = user.secrets_found + assistant.secrets_found
        if found:
            self._telemetry.secrets_dropped(found)
            log.info("dropped %d secret(s) before extraction", found)
        if not user.text.strip():
            return None
        live = await self._store.live_facts(turn.scope)
        turn_input = ExtractionInput(user.text, assistant.text, recalled=[f.text for f in live])
        extractor = self._extractor
        try:
            candidates = await extractor.extract(turn_input)
        except Unavailable as exc:
            if self._fallback_extractor is None:
                raise
            # An LLM outage must not lose the turn's facts: the rules still see the obvious.
            log.warning(
                "extractor %s unavailable (%s); using %s",
                extractor.name,
                exc,
                self._fallback_extractor.name,
            )
            extractor = self._fallback_extractor
            candidates = await extractor.extract(turn_input)
        return (candidates, extractor.name) if candidates else None

    async def _known_vectors(self, live: Sequence[LiveFact]) -> dict[str, list[float]]:
        """Vectors the index already has for the live facts, so reconciliation embeds only
        the candidates. A fact the index has no vector for is embedded again, and counted
        (`live_vectors_missing`) and logged: a miss on every pass means the index's replies
        are not being read (issue 14, finding 6), not that re-embedding is normal."""
        if not live:
            return {}
        try:
            known = await self._index.vectors([f.version_id for f in live])
        except Exception as exc:
            self.live_vectors_missing += len(live)
            self._telemetry.live_vectors_missing(len(live))
            log.warning("live fact vectors unavailable, embedding instead: %s", type(exc).__name__)
            return {}
        missing = sum(1 for f in live if f.version_id not in known)
        if missing:
            self.live_vectors_missing += missing
            self._telemetry.live_vectors_missing(missing)
            # INFO: facts the outbox has not indexed yet miss too; a miss on every pass is the
            # sign of misread replies.
            log.info(
                "the %s index has no vector for %d of %d live facts; embedding them again",
                self._index.name,
                missing,
                len(live),
            )
        return known

    async def _apply(
        self,
        scope: Scope,
        decisions: Sequence[ReconciledCandidate],
        provenance: Provenance,
        revise: Revise | None = None,
    ) -> list[AppliedChange]:
        [applied] = await self._apply_batch(scope, [Applying(decisions, provenance, revise)])
        return applied

    async def _apply_batch(
        self, scope: Scope, changes: Sequence[Applying]
    ) -> list[list[AppliedChange]]:
        applied = await self._store.apply_batch(
            scope, [_standing(c) for c in changes], max_live=self._settings.max_facts_per_scope
        )
        self._common_words.forget(scope)
        decisions = [c.decision for each in applied for c in each]
        for decision in decisions:
            self._telemetry.fact_decision(decision.value)
        if any(d is not Decision.NONE for d in decisions):
            self._on_change()
        return applied

    async def close(self, timeout_s: float = 10.0) -> None:
        """Let background extractions finish (bounded), then cancel. Idempotent."""
        self._closed = True
        await finish_or_cancel(list(self._tasks), timeout_s)

    # --- manual operations -------------------------------------------------------------------

    async def add_fact(self, scope: Scope, fact: NewFact) -> AppliedChange:
        """Adds the fact unless a live fact has the same normalised text: then that one is
        returned (NONE) and nothing is written, however many servers are asked at once."""
        # Re-checked under the lock against the live facts as the AddFacts before it in its
        # batch left them: the same text twice is stored once, and both get its id.
        [adding] = await self._adding([fact])
        return await self._executor.run_batched(
            scope, "add_fact", adding, lambda batch: self._add_facts(scope, batch)
        )

    async def add_facts(self, scope: Scope, facts: Sequence[NewFact]) -> list[AppliedChange]:
        """Every fact as `add_fact` would store it, in order, in one transaction on the scope's
        actor: all are stored, or on any error none is. A text equal to a live fact's (or to
        an earlier one of the call) writes nothing and answers that fact's id (NONE)."""
        adding = await self._adding(facts)

        async def job() -> list[AppliedChange]:
            return await self._add_facts(scope, adding)

        return await self._executor.run(scope, job)

    async def _adding(self, facts: Sequence[NewFact]) -> list[Applying]:
        """Hand-added facts, dated, as changes to apply; each is re-checked under the scope's
        lock against the live facts as the changes before it left them."""
        candidates = await dated(
            [Candidate(f.text, f.kind, said_at=f.valid_from) for f in facts], self._events
        )
        out: list[Applying] = []
        for fact, candidate in zip(facts, candidates, strict=True):
            decisions = [ReconciledCandidate(Decision.ADD, candidate)]
            out.append(
                Applying(
                    decisions,
                    Provenance(fact.conversation_id, extractor=MANUAL),
                    functools.partial(revalidate, decisions),
                )
            )
        return out

    async def _add_facts(self, scope: Scope, adding: list[Applying]) -> list[AppliedChange]:
        """AddFacts queued back to back on the scope's actor, in one transaction."""
        return [one for [one] in await self._apply_batch(scope, adding)]

    async def update_fact(
        self, scope: Scope, fact_id: str, text: str, kind: FactKind | None
    ) -> AppliedChange:
        async def job() -> AppliedChange:
            current = await self._live_version(scope, fact_id)
            decision = ReconciledCandidate(
                Decision.UPDATE, Candidate(text, kind or current.kind), fact_id
            )
            # A target closed meanwhile (by another server) makes the store answer NotFound.
            [applied] = await self._apply(scope, [decision], Provenance(extractor=MANUAL))
            return applied

        return await self._executor.run(scope, job)

    async def delete_fact(self, scope: Scope, fact_id: str, *, ended: bool) -> None:
        async def job() -> None:
            current = await self._live_version(scope, fact_id)
            decision = ReconciledCandidate(
                Decision.DELETE, Candidate(current.text, current.kind, retraction=True), fact_id
            )
            await self._store.apply(
                scope,
                [decision],
                Provenance(extractor=MANUAL),
                max_live=self._settings.max_facts_per_scope,
                ended=ended,
            )
            self._common_words.forget(scope)
            self._telemetry.fact_decision(Decision.DELETE.value)
            self._on_change()

        await self._executor.run(scope, job)

    async def _live_version(self, scope: Scope, fact_id: str) -> FactVersion:
        versions = await self._store.fact_versions(scope, fact_id)
        live = [v for v in versions if v.superseded_at is None and v.valid_to is None]
        if not live:
            raise NotFound(f"fact_id: fact {fact_id!r} is not live (deleted or superseded)")
        return live[0]

    async def forget_scope(self, scope: Scope, *, include_messages: bool) -> dict[str, int]:
        async def job() -> dict[str, int]:
            return await self._store.forget_scope(scope, include_messages=include_messages)

        counts = await self._executor.run(scope, job)
        self._common_words.forget(scope)
        self._on_change()
        return counts

    # --- reads -------------------------------------------------------------------------------

    async def list_facts(
        self, scope: Scope, as_of: AsOf, limit: int, offset: int
    ) -> list[FactVersion]:
        return await self._store.list_facts(scope, as_of, limit, offset)

    async def get_fact(self, scope: Scope, fact_id: str) -> list[FactVersion]:
        return await self._store.fact_versions(scope, fact_id)

    async def live_links(self, scope: Scope, versions: Sequence[FactVersion]) -> list[FactLink]:
        """The live links of the fact's live version (none once it is closed)."""
        live = [v.version_id for v in versions if v.superseded_at is None and v.valid_to is None]
        return await self._store.live_links(scope, live)

    async def history(self, scope: Scope, fact_id: str) -> list[HistoryEvent]:
        return await self._store.history(scope, fact_id)
