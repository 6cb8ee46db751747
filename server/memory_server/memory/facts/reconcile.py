"""The offline default reconciler: embedding similarity plus a few rules for facts that clash.

Candidates are decided in order against the scope's live facts *and* the candidates before them
in the same batch (two identical candidates yield one ADD and one NONE; a NONE or an update
that points at a fact added earlier in the batch has no target: that fact has no id yet):

* NONE    same normalised text as a fact, or cosine >= `duplicate_at` with a fact it does not
          clash with (see below) and that names the same values (memory.facts.values: numbers,
          versions, codes, dates, names): already known. A retraction whose best match is below
          `related_at` is NONE with no target: there is nothing to retract.
* DELETE  a retraction whose best match (any kind) is >= `related_at`; a fact that holds the
          opposite stance ("Dislikes jazz" for a retracted "Likes jazz") is never its match.
* UPDATE  a fact of the same kind that the candidate clashes with (slot rules below), or that
          it repeats with a changed figure (the same frame and names: "Has 2 kids" → "Has 3
          kids", "Will use Postgres 14 → 16 for the pilot", >= `related_at`), or, for a
          candidate marked `change`, the best same-kind fact >= `related_at` that is not about
          another slot ("I now prefer answers in French" must not replace "Prefers concise
          answers").
* NONE    (with `restated_at`, the learning path's precise facts) a candidate that names no
          time of its own and no new value, with cosine >= `restated_at` to a fact of the same
          stance and subject: the same state said again in other words ("Dancing makes them
          so happy" after "Dancing brings them joy", "Is part of the fire-fighting brigade"
          after "Just joined a fire-fighting brigade"). A dated one ("Went to a pride parade
          last Friday") is a new event, however similar; "Likes blues" after "Likes jazz" is
          about another thing.
* NONE    (with `probe`, the learning path's precise facts) a self statement, preference or
          goal that the probe on its vector takes for small talk or a vague one
          (memory/facts/probe.py): nothing is kept, and it has no target.
* ADD     anything else.

Slot rules (memory.facts.shape) tell a restatement from a contradiction.

A fact the candidate clashes with is never its near-duplicate, however similar: the candidate
UPDATEs it.

A superseded candidate of the same batch ("I prefer coffee. Actually, I prefer tea now.") has no
fact to update yet, so the earlier decision is turned into NONE with no target and the later
candidate is ADDed. Live facts' vectors can be passed in (`live_vectors`, keyed by version id,
because a vector belongs to one version's text); the rest are embedded with the candidates in
one `embed` call.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from memory_server.memory.facts.meaning import other_subject, other_thing
from memory_server.memory.facts.model import (
    Candidate,
    Decision,
    FactKind,
    LiveFact,
    ReconciledCandidate,
)
from memory_server.memory.facts.probe import FactProbe
from memory_server.memory.facts.shape import (
    FactShape,
    about_other_slots,
    clashes,
    normalise,
    opposed,
    shape_of,
)
from memory_server.memory.facts.values import Values, changed, differ, introduces, values_of
from memory_server.memory.ports import Embedder, Revise


@dataclass(slots=True)
class _Entry:
    """A fact as this batch sees it: live, or added by an earlier candidate (`fact_id` "")."""

    fact_id: str
    kind: FactKind
    key: str
    vector: Sequence[float]
    norm: float
    shape: FactShape
    values: Values
    added_by: int = -1
    deleted: bool = False


class SimilarityReconciler:
    """Reconciler that needs no language model: embeddings plus slot rules (see module doc)."""

    def __init__(
        self,
        embedder: Embedder,
        *,
        duplicate_at: float = 0.92,
        related_at: float = 0.55,
        restated_at: float | None = None,
        probe: FactProbe | None = None,
    ) -> None:
        if not 0.0 < related_at <= duplicate_at <= 1.0:
            raise ValueError("need 0 < related_at <= duplicate_at <= 1")
        if restated_at is not None and not related_at <= restated_at <= duplicate_at:
            raise ValueError("need related_at <= restated_at <= duplicate_at")
        self._embedder = embedder
        self._duplicate_at = duplicate_at
        self._related_at = related_at
        self._restated_at = restated_at
        self._probe = probe

    async def reconcile(
        self,
        candidates: Sequence[Candidate],
        live: Sequence[LiveFact],
        *,
        live_vectors: Mapping[str, Sequence[float]] | None = None,
    ) -> list[ReconciledCandidate]:
        """Decide each candidate, in order. `live_vectors` maps version id → that version's
        vector from this embedder's model; a missing or wrongly sized one is embedded."""
        if not candidates:
            return []
        known = live_vectors or {}
        dimension = self._embedder.dimension
        given: dict[str, Sequence[float]] = {}  # version id → vector
        for f in live:
            v = known.get(f.version_id)
            if v is not None and len(v) == dimension:
                given[f.version_id] = v
        # One call for everything: the pool batches across scopes, but per-call overhead and
        # a model round trip per text would still dominate a turn with many live facts.
        texts = [c.text for c in candidates] + [f.text for f in live if f.version_id not in given]
        texts = list(dict.fromkeys(texts))  # each distinct text once
        vectors: dict[str, Sequence[float]] = dict(
            zip(texts, await self._embedder.embed(texts), strict=True)
        )
        entries = [
            _entry(f.fact_id, f.kind, f.text, given[f.version_id])
            if f.version_id in given
            else _entry(f.fact_id, f.kind, f.text, vectors[f.text])
            for f in live
        ]
        decisions: list[ReconciledCandidate] = []
        for index, candidate in enumerate(candidates):
            me = _entry("", candidate.kind, candidate.text, vectors[candidate.text], index)
            sims = [_cosine(me, e) for e in entries]
            if candidate.retraction:
                decisions.append(self._retract(candidate, me, entries, sims, decisions))
            else:
                decisions.append(self._assert(candidate, me, entries, sims, decisions))
        return decisions

    def _retract(
        self,
        candidate: Candidate,
        me: _Entry,
        entries: list[_Entry],
        sims: list[float],
        decisions: list[ReconciledCandidate],
    ) -> ReconciledCandidate:
        best = _best(
            (s if e.key != me.key else 2.0, e)
            for e, s in zip(entries, sims, strict=True)
            if (e.fact_id or e.added_by >= 0) and not opposed(me.shape, e.shape)
        )
        if best is None or best[0] < self._related_at:
            return ReconciledCandidate(Decision.NONE, candidate)
        target = best[1]
        if target.deleted:  # retracted twice in one turn: do not pick a next-best victim
            return ReconciledCandidate(Decision.NONE, candidate, target.fact_id)
        target.deleted = True
        if not target.fact_id:  # said and taken back in one turn: store neither
            earlier = decisions[target.added_by]
            decisions[target.added_by] = ReconciledCandidate(Decision.NONE, earlier.candidate)
            return ReconciledCandidate(Decision.NONE, candidate)
        return ReconciledCandidate(Decision.DELETE, candidate, target.fact_id)

    def _assert(
        self,
        candidate: Candidate,
        me: _Entry,
        entries: list[_Entry],
        sims: list[float],
        decisions: list[ReconciledCandidate],
    ) -> ReconciledCandidate:
        active = [(s, e) for e, s in zip(entries, sims, strict=True) if not e.deleted]
        for _, e in active:
            if e.key == me.key:
                return ReconciledCandidate(Decision.NONE, candidate, e.fact_id)
        probe = self._probe
        if probe is not None and probe.judges(candidate) and not probe.keeps(me.vector):
            return ReconciledCandidate(Decision.NONE, candidate)  # small talk: nothing to keep
        clashing = [(s, e) for s, e in active if clashes(me.shape, e.shape)]
        duplicate = _best(
            (s, e)
            for s, e in active
            if s >= self._duplicate_at
            and not clashes(me.shape, e.shape)
            and not differ(me.values, e.values)
        )
        if duplicate is not None:
            return ReconciledCandidate(Decision.NONE, candidate, duplicate[1].fact_id)
        target = _best((s, e) for s, e in clashing if e.kind == me.kind)
        if target is None:  # "Has 2 kids" → "Has 3 kids": the same fact with a new value
            target = _best(
                (s, e)
                for s, e in active
                if e.kind == me.kind and s >= self._related_at and changed(me.values, e.values)
            )
        if target is None and candidate.change:
            target = _best(
                (s, e)
                for s, e in active
                if e.kind == me.kind
                and s >= self._related_at
                and not about_other_slots(me.shape, e.shape)
            )
        if target is None:
            if (again := self._restated(candidate, me, active)) is not None:
                return ReconciledCandidate(Decision.NONE, candidate, again.fact_id)
            entries.append(me)
            return ReconciledCandidate(Decision.ADD, candidate)
        old = target[1]
        if old.fact_id:
            decision = ReconciledCandidate(Decision.UPDATE, candidate, old.fact_id)
        else:  # superseded within this batch: the earlier candidate is not stored at all
            earlier = decisions[old.added_by]
            decisions[old.added_by] = ReconciledCandidate(Decision.NONE, earlier.candidate)
            decision = ReconciledCandidate(Decision.ADD, candidate)
            old.added_by = me.added_by
        # Later candidates of this batch see the fact as it will be after this decision.
        old.kind, old.key, old.vector, old.norm, old.shape, old.values = (
            me.kind,
            me.key,
            me.vector,
            me.norm,
            me.shape,
            me.values,
        )
        return decision

    def _restated(
        self, candidate: Candidate, me: _Entry, active: list[tuple[float, _Entry]]
    ) -> _Entry | None:
        """The fact an undated candidate says again in other words (module doc), if any."""
        if (
            self._restated_at is None
            or candidate.change
            or candidate.standing
            or candidate.event is not None
        ):
            return None
        threshold = self._restated_at
        best = _best(
            (s, e)
            for s, e in active
            if s >= threshold
            and not opposed(me.shape, e.shape)
            and not other_subject(me.shape, e.shape)
            and not other_thing(me.key, e.key)
            and not introduces(me.values, e.values)
        )
        return None if best is None else best[1]


def _entry(
    fact_id: str, kind: FactKind, text: str, vector: Sequence[float], added_by: int = -1
) -> _Entry:
    return _Entry(
        fact_id,
        kind,
        _key(text),
        vector,
        math.hypot(*vector),
        _shape(text),
        values_of(text),
        added_by,
    )


# A scope's live facts come back on every turn: parse each text once, not once per turn.
_key = functools.lru_cache(maxsize=16384)(normalise)
_shape = functools.lru_cache(maxsize=16384)(shape_of)


def _cosine(a: _Entry, b: _Entry) -> float:
    if a.norm == 0.0 or b.norm == 0.0:
        return 0.0
    dot: float = sum(map(operator.mul, a.vector, b.vector))
    return dot / (a.norm * b.norm)


def _best(scored: Iterable[tuple[float, _Entry]]) -> tuple[float, _Entry] | None:
    """The highest score; the earliest entry wins a tie, so decisions are deterministic."""
    best: tuple[float, _Entry] | None = None
    for score, entry in scored:
        if best is None or score > best[0]:
            best = (score, entry)
    return best


def revalidate(
    decisions: Sequence[ReconciledCandidate], live: Sequence[LiveFact]
) -> list[ReconciledCandidate]:
    """Decisions made against an older view of the scope's live facts, re-checked against
    `live` by the rules that need no embedding, so that they can run under the scope's write
    lock when another writer changed the facts meanwhile (and for AddFact, always):

    * an asserted candidate whose normalised text is live already is NONE for that fact, so
      two writers stating the same fact store it once;
    * an UPDATE whose target is gone is an ADD; a DELETE whose target is gone is NONE;
    * a NONE whose target is gone is an ADD: what it restated was removed meanwhile.

    Near-duplicates and slot clashes with facts that appeared meanwhile need embeddings; the
    caller reconciles again for those when it can afford to (see learning.learn.Learning.learn)."""
    key_of = {f.fact_id: _key(f.text) for f in live}
    holder = {key: fact_id for fact_id, key in key_of.items()}  # "" = added by this batch
    revised: list[ReconciledCandidate] = []
    for item in decisions:
        candidate, target = item.candidate, item.target_fact_id
        if item.decision is Decision.DELETE or candidate.retraction:
            if target and target in key_of:
                revised.append(item)
                if item.decision is Decision.DELETE:
                    holder.pop(key_of.pop(target), None)
            else:
                revised.append(ReconciledCandidate(Decision.NONE, candidate))
            continue
        if item.decision is Decision.NONE and (not target or target in key_of):
            revised.append(item)
            continue
        key = _key(candidate.text)
        if key in holder:
            revised.append(ReconciledCandidate(Decision.NONE, candidate, holder[key]))
        elif item.decision is Decision.UPDATE and target in key_of:
            revised.append(item)
            holder.pop(key_of[target], None)
            key_of[target] = key
            holder[key] = target
        else:
            revised.append(ReconciledCandidate(Decision.ADD, candidate))
            holder[key] = ""
    return revised


class LiveFactsChanged(Exception):
    """Another writer changed the scope's live facts after they were read for reconciliation."""


def revision(
    seen: Sequence[LiveFact], decisions: Sequence[ReconciledCandidate], *, last: bool
) -> Revise:
    """What `apply` does under the lock with decisions made against `seen`: keep them if the
    live facts are still exactly those versions, else reconcile again (raise), or, on the last
    try, re-check them cheaply."""
    seen_versions = {f.version_id for f in seen}

    def revise(live: Sequence[LiveFact]) -> Sequence[ReconciledCandidate]:
        if {f.version_id for f in live} == seen_versions:
            return decisions
        if not last:
            raise LiveFactsChanged
        return revalidate(decisions, live)

    return revise
