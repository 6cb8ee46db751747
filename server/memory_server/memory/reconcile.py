"""The offline default reconciler: embedding similarity plus a few rules for facts that clash.

Candidates are decided in order against the scope's live facts *and* the candidates before them
in the same batch (two identical candidates yield one ADD and one NONE; a NONE or an update
that points at a fact added earlier in the batch has no target: that fact has no id yet):

* NONE    same normalised text as a fact, or cosine >= `duplicate_at` with a fact it does not
          clash with (see below): already known. A retraction whose best match is below
          `related_at` is NONE with no target: there is nothing to retract.
* DELETE  a retraction whose best match (any kind) is >= `related_at`; a fact that holds the
          opposite stance ("Dislikes jazz" for a retracted "Likes jazz") is never its match.
* UPDATE  a fact of the same kind that the candidate clashes with (slot rules below), or, for a
          candidate marked `change`, the best same-kind fact >= `related_at` that is not about
          another slot ("I now prefer answers in French" must not replace "Prefers concise
          answers").
* ADD     anything else.

Slot rules. Similarity alone cannot tell a restatement from a contradiction: with MiniLM
"Wants the assistant to never use emojis" and "... always use emojis" score 0.97, while
"Prefers concise bullet points" and "Prefers long explanations" score only 0.48. So a fact's
text is parsed into a small shape:

* stances: the object of a polar head (prefers/likes/loves/enjoys/is a fan of/wants the
  assistant to [always] → positive; dislikes/hates/avoids/can't stand/wants the assistant to
  never → negative), plus every vocabulary value found in it. The same object or value with
  opposite polarity clashes ("Likes jazz" / "Hates jazz", "Prefers tables" / "Wants the
  assistant to never use tables").
* exclusive slots: one value at a time. From exclusive preference heads (prefers, would rather,
  wants the assistant to, wants answers): answer language (needs "in <Language>" or a word like
  answer/reply/write), verbosity (short/long), format (bullets/table/prose/numbered/json/yaml),
  tone (formal/casual), units, drink, programming language, query language, graph database.
  From attribute texts "<Attribute> is <Value>" ("Timezone is CET", "Favourite graph is
  Finance"; favorite = favourite, time zone = timezone, job/title/position = role, leading
  current/main/primary/preferred dropped), "Wants to be called X" / "Goes by X" (called),
  "Lives in X" / "Is based in X" (location), "Works at/for X" (employer), "Works as X" (role).
  A shared slot with different values clashes, unless the preferences carry different
  qualifiers ("... for summaries" vs none): a narrower preference does not replace a general one.

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
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from memory_server.memory.facts import (
    Candidate,
    Decision,
    FactKind,
    LiveFact,
    ReconciledCandidate,
)
from memory_server.memory.ports import Embedder

_WORD_RE = re.compile(r"[\w+#][\w+#'-]*")
_NEGATIVE_HEADS = (
    "wants the assistant to never ",
    "doesn't like ",
    "does not like ",
    "can't stand ",
    "cannot stand ",
    "dislikes ",
    "hates ",
    "avoids ",
)
_EXCLUSIVE_HEADS = (
    "wants the assistant to always ",
    "wants the assistant to ",
    "wants answers ",
    "would rather ",
    "prefers ",
)
_PLAIN_HEADS = ("is a big fan of ", "is a fan of ", "likes ", "loves ", "enjoys ")
_LEAD_RE = re.compile(r"^(?:the user's |user's |their |my )")
_QUALIFIER_RE = re.compile(r"\b(?:for|when|while|during|if)\b (.+)$")
_LANGUAGE_CUE_RE = re.compile(
    r"\b(?:answers?|respon(?:d|ses?)|repl(?:y|ies)|writ(?:e|ten|ing)|speak|talk|language|"
    r"explanations?|explain)\b"
)


def _same(words: str) -> list[tuple[str, str]]:
    """Vocabulary entries that are their own value."""
    return [(re.escape(w), w) for w in words.split()]


_LANGUAGES = """english french german spanish portuguese italian dutch polish russian ukrainian
chinese mandarin cantonese japanese korean arabic hindi turkish swedish norwegian danish finnish
greek hebrew czech vietnamese thai indonesian"""
_LANGUAGE_RE = re.compile(r"\b(" + "|".join(_LANGUAGES.split()) + r")\b")
_SHORT = r"concise|short(?:er)?|brief(?:er)?|terse|succinct|compact|minimal|to the point"
_LONG = r"long(?:er)?|detailed|verbose|lengthy|in[- ]depth|thorough|elaborate|comprehensive"
_LONG += r"|extensive|exhaustive"

# slot -> [(pattern, value)]; the earliest match in the text is the preferred value, so
# "Prefers GSQL over Cypher" is about GSQL.
_VOCABULARY: dict[str, list[tuple[re.Pattern[str], str]]] = {
    slot: [(re.compile(rf"(?<![\w+#])(?:{pattern})(?![\w+#])"), value) for pattern, value in pairs]
    for slot, pairs in {
        "verbosity": [(_SHORT, "short"), (_LONG, "long")],
        "format": [
            (r"bullet(?:ed)?(?:[- ]points?)?s?", "bullets"),
            (r"tables?|tabular", "table"),
            (r"prose|paragraphs?|plain text|full sentences", "prose"),
            (r"numbered (?:lists?|steps)", "numbered"),
            *_same("json yaml"),
        ],
        "tone": [(r"formal", "formal"), (r"casual|informal", "casual")],
        "units": _same("metric imperial"),
        "drink": _same("coffee tea espresso latte cappuccino matcha chai decaf cocoa milk"),
        "programming language": _same(
            "python java javascript typescript golang rust scala kotlin ruby php julia c++ c#"
        ),
        "query language": _same("gsql cypher gremlin sparql sql"),
        "graph database": _same(
            "tigergraph neo4j neptune memgraph arangodb janusgraph nebulagraph"
        ),
    }.items()
}
_ATTRIBUTE_RE = re.compile(r"^(?P<attr>[a-z][\w' -]*?) (?:is|are) (?P<value>\S.*)$")
_HEAD_VERBS = """is was wants prefers likes loves hates dislikes enjoys works lives decided will
chose plans hopes goes avoids"""
_NOT_ATTRIBUTE_WORDS = frozenset(_HEAD_VERBS.split())
_ATTRIBUTE_ALIASES = {"time zone": "timezone", "tz": "timezone", "job": "role", "title": "role"}
_ATTRIBUTE_ALIASES |= {"job title": "role", "position": "role"}
_RELATION_RES = [
    (re.compile(r"^(?:wants to be called|goes by) (?P<value>.+)$"), "called"),
    (re.compile(r"^(?:lives in|is based in) (?P<value>.+)$"), "location"),
    (re.compile(r"^works (?:at|for) (?P<value>.+)$"), "employer"),
    (re.compile(r"^works as (?P<value>.+)$"), "role"),
    (re.compile(r"^is in (?:the )?(?P<value>\S+) time ?zone$"), "timezone"),
]


def normalise(text: str) -> str:
    """Lower case, straight apostrophes, words only: the key for "same text"."""
    return " ".join(_WORD_RE.findall(text.replace("’", "'").casefold()))


@dataclass(frozen=True, slots=True)
class FactShape:
    """What the slot rules see of a fact's text (see the module doc)."""

    slots: Mapping[str, str] = field(default_factory=dict)
    stances: Mapping[str, bool] = field(default_factory=dict)
    qualifier: str = ""


def shape_of(text: str) -> FactShape:
    t = _LEAD_RE.sub("", normalise(text))
    for slot_re, slot in _RELATION_RES:
        if m := slot_re.match(t):
            return FactShape(slots={slot: _value(m["value"])})
    head, positive, exclusive = "", True, False
    for heads, pos, exc in (
        (_NEGATIVE_HEADS, False, False),
        (_EXCLUSIVE_HEADS, True, True),
        (_PLAIN_HEADS, True, False),
    ):
        head = next((h for h in heads if t.startswith(h)), "")
        if head:
            positive, exclusive = pos, exc
            break
    if not head:
        m = _ATTRIBUTE_RE.match(t)
        if m and len(words := m["attr"].split()) <= 4 and not _NOT_ATTRIBUTE_WORDS & set(words):
            return FactShape(slots={_attribute(m["attr"]): _value(m["value"])})
        return FactShape()
    obj = t[len(head) :]
    stances = {"obj:" + obj: positive}
    slots: dict[str, str] = {}
    for slot, value in _vocabulary_values(obj):
        stances[f"{slot}:{value}"] = positive
        if exclusive:
            slots[slot] = value
    qualifier = m[1] if exclusive and (m := _QUALIFIER_RE.search(obj)) else ""
    return FactShape(slots=slots, stances=stances, qualifier=qualifier)


def clashes(a: FactShape, b: FactShape) -> bool:
    """True when the two facts cannot both hold (see the module doc)."""
    if any(k in b.stances and b.stances[k] != v for k, v in a.stances.items()):
        return True
    if a.qualifier != b.qualifier:
        return False
    return any(k in b.slots and b.slots[k] != v for k, v in a.slots.items())


def same_slot(a: FactShape, b: FactShape) -> bool:
    """True when the two facts are about one slot or stance, whatever their values."""
    return bool(set(a.slots) & set(b.slots) or set(a.stances) & set(b.stances))


def _about_other_slots(a: FactShape, b: FactShape) -> bool:
    return bool(a.slots and b.slots and not set(a.slots) & set(b.slots))


def _opposed(a: FactShape, b: FactShape) -> bool:
    return any(k in b.stances and b.stances[k] != v for k, v in a.stances.items())


def _vocabulary_values(text: str) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    if (m := _LANGUAGE_RE.search(text)) and (_LANGUAGE_CUE_RE.search(text) or f"in {m[1]}" in text):
        found.append(("language", m[1]))
    for slot, patterns in _VOCABULARY.items():
        hits = [(m.start(), value) for pattern, value in patterns if (m := pattern.search(text))]
        if hits:
            found.append((slot, min(hits)[1]))
    return found


def _attribute(attr: str) -> str:
    attr = attr.replace("favorite", "favourite")
    attr = re.sub(r"^(?:current|main|primary|preferred|usual) ", "", attr)
    return _ATTRIBUTE_ALIASES.get(attr, attr)


def _value(value: str) -> str:
    return re.sub(r"^(?:called |set to |the )", "", value).strip()


@dataclass(slots=True)
class _Entry:
    """A fact as this batch sees it: live, or added by an earlier candidate (`fact_id` "")."""

    fact_id: str
    kind: FactKind
    key: str
    vector: Sequence[float]
    norm: float
    shape: FactShape
    added_by: int = -1
    deleted: bool = False


class SimilarityReconciler:
    """Reconciler that needs no language model: embeddings plus slot rules (see module doc)."""

    def __init__(
        self, embedder: Embedder, *, duplicate_at: float = 0.92, related_at: float = 0.55
    ) -> None:
        if not 0.0 < related_at <= duplicate_at <= 1.0:
            raise ValueError("need 0 < related_at <= duplicate_at <= 1")
        self._embedder = embedder
        self._duplicate_at = duplicate_at
        self._related_at = related_at

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
            if (e.fact_id or e.added_by >= 0) and not _opposed(me.shape, e.shape)
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
        clashing = [(s, e) for s, e in active if clashes(me.shape, e.shape)]
        duplicate = _best(
            (s, e) for s, e in active if s >= self._duplicate_at and not clashes(me.shape, e.shape)
        )
        if duplicate is not None:
            return ReconciledCandidate(Decision.NONE, candidate, duplicate[1].fact_id)
        target = _best((s, e) for s, e in clashing if e.kind == me.kind)
        if target is None and candidate.change:
            target = _best(
                (s, e)
                for s, e in active
                if e.kind == me.kind
                and s >= self._related_at
                and not _about_other_slots(me.shape, e.shape)
            )
        if target is None:
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
        old.kind, old.key, old.vector, old.norm, old.shape = (
            me.kind,
            me.key,
            me.vector,
            me.norm,
            me.shape,
        )
        return decision


def _entry(
    fact_id: str, kind: FactKind, text: str, vector: Sequence[float], added_by: int = -1
) -> _Entry:
    return _Entry(fact_id, kind, _key(text), vector, math.hypot(*vector), _shape(text), added_by)


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
    caller reconciles again for those when it can afford to (see LongTermMemory.learn)."""
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
