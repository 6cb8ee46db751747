"""Hybrid recall: vector similarity fused with lexical coverage, scores in [0, 1].

On LoCoMo turn retrieval, lexical matching beats MiniLM vectors (R@10 58.4 vs 51.4), and each
finds hits the other misses, so both vote. The fusion is a probabilistic OR of two scores that
are each in [0, 1]:

    vector   = max(0, cosine)
    coverage = idf-weighted share of the query's distinct stemmed words the fact contains
               (store.facts.lexical: BM25 idf over the scope's facts believed at as-of)
    lexical  = 1 - (1 - coverage)^2
    score    = 1 - (1 - vector) * (1 - lexical)

so a fact scores high when either signal is strong, higher when both are, and a threshold such
as `ltm_score_threshold` = 0.7 keeps one meaning for every query.

Lexical evidence votes twice in the OR (the square): ranking-wise that is
1 - sqrt(1 - vector) * (1 - coverage), i.e. the vector vote weighs half as much, because lexical
matching is the stronger signal (above). It also keeps the threshold's meaning: idf weighting
lowers coverage wherever a query's common words (a speaker's name) match, so without the square
the default 0.7 would pass fewer of the facts a question needs than plain coverage did; with it,
more pass, and about as many unrelated ones (bench/locomo_recall.py, bench/README.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from memory_server.memory.facts.model import FactVersion
from memory_server.memory.facts.shape import normalise, shape_of

# Slots (memory.facts.shape) that describe how the assistant should answer.
_ANSWER_STYLE_SLOTS = frozenset({"language", "verbosity", "format", "tone", "units"})
# The extractor's form of an instruction, and the imperative a person types into AddFact.
_INSTRUCTION_OPENINGS = (
    "wants the assistant to ",
    "always ",
    "never ",
    "please always ",
    "please never ",
)


def is_standing_instruction(text: str) -> bool:
    """An instruction about how to answer ("Wants the assistant to always answer in French",
    "Prefers concise bullet points") applies to every later turn, whatever the question, so
    recall includes it even when the question shares no words with it."""
    if normalise(text).startswith(_INSTRUCTION_OPENINGS):
        return True
    return bool(_ANSWER_STYLE_SLOTS & shape_of(text).slots.keys())


@dataclass(frozen=True, slots=True)
class ScoredFact:
    version: FactVersion
    score: float
    vector_score: float
    lexical_score: float


def lexical_evidence(coverage: float) -> float:
    """The lexical vote from the idf-weighted coverage: counted twice in the OR, in [0, 1]."""
    c = min(1.0, max(0.0, coverage))
    return 1.0 - (1.0 - c) * (1.0 - c)


def fuse(vector: float, lexical: float) -> float:
    v = min(1.0, max(0.0, vector))
    w = min(1.0, max(0.0, lexical))
    return 1.0 - (1.0 - v) * (1.0 - w)


def rank(
    versions: Mapping[str, FactVersion],
    cosines: Mapping[str, float],
    coverages: Mapping[str, float],
    *,
    top_k: int | None,
    threshold: float,
    extra_vote: Callable[[FactVersion], float] | None = None,
    weight: Callable[[FactVersion], float] | None = None,
) -> list[ScoredFact]:
    """Scores every version found by either signal; best first, at least `threshold`, at most
    `top_k` (None: all). Ties go to the more recently recorded version. `extra_vote`
    (memory.time.intent) adds one more vote to the OR per version; `weight` (the question's
    subject, memory.recall.common_words) multiplies the result."""
    scored = []
    for version_id, version in versions.items():
        vector = max(0.0, cosines.get(version_id, 0.0))
        lexical = lexical_evidence(coverages.get(version_id, 0.0))
        score = fuse(vector, lexical)
        if extra_vote is not None:
            score = fuse(score, extra_vote(version))
        if weight is not None:
            score *= weight(version)
        if score >= threshold:
            scored.append(ScoredFact(version, score, vector, lexical))
    scored = best_first(scored)
    return scored[:top_k] if top_k is not None else scored


def best_first(scored: Iterable[ScoredFact]) -> list[ScoredFact]:
    """Highest score first; of two equal scores, the later recorded."""
    return sorted(scored, key=lambda s: (s.score, s.version.recorded_at), reverse=True)
