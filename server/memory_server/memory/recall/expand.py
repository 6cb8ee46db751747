"""One-hop expansion of recall along semantic links (written by the outbox, store fact_links).

A question's best hits pull in the facts linked to them: a question that needs two facts
together often shares words with only one ("When did Caroline go to the LGBTQ support group"
finds the support group, and the link brings the later "I went yesterday"). A linked fact
scores below its source:

    score(linked) = score(source) * decay * cosine(link)

so it never outranks what brought it in; a fact found both ways keeps its better score. A linked
fact or neighbour that does not name the question's subject is weighed like a direct hit that
does not (`weight`, memory.recall.common_words).

The same hits also bring in their neighbours: the facts said just before and just after them in
the same conversation (provenance; README "Neighbours"), at

    score(neighbour) = score(source) * neighbour_decay

A question's answer is often said next to what the question shares words with: "What did
Melanie paint?" finds Caroline's "that painting of yours is lovely", and Melanie's reply before
it says what she painted. Links and neighbours come from one query that already filtered them
(and the links) by the as-of point, so expansion, like the signals, filters before it ranks.
`decay` = 0 stops following links, `neighbour_decay` = 0 stops bringing in neighbours.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from memory_server.memory.facts.model import FactVersion
from memory_server.memory.ports import LinkedVersion
from memory_server.memory.recall.rank import ScoredFact, best_first


@dataclass(frozen=True, slots=True)
class ExpandSettings:
    # Measured on the LoCoMo dev split (bench/locomo_recall.py, bench/README.md "Subjects").
    decay: float = 0.5
    seeds: int = 5  # the best hits whose links (and neighbours) are followed
    neighbour_decay: float = 0.0

    @property
    def enabled(self) -> bool:
        return (self.decay > 0 or self.neighbour_decay > 0) and self.seeds > 0

    @property
    def neighbours(self) -> bool:
        return self.neighbour_decay > 0 and self.seeds > 0


def seeds(ranked: Sequence[ScoredFact], settings: ExpandSettings) -> list[str]:
    """The version ids whose links are followed: the best `settings.seeds` hits."""
    return [s.version.version_id for s in ranked[: settings.seeds]] if settings.enabled else []


def expand(
    ranked: Sequence[ScoredFact],
    linked: Sequence[LinkedVersion],
    settings: ExpandSettings,
    *,
    top_k: int,
    threshold: float,
    weight: Callable[[FactVersion], float] | None = None,
) -> list[ScoredFact]:
    """`ranked` (best first) with the linked versions merged in, deduplicated by version,
    best first, at least `threshold`, at most `top_k`. `weight` multiplies a linked
    version's score, as recall.rank's does a direct hit's."""
    best: dict[str, ScoredFact] = {s.version.version_id: s for s in ranked}
    source = {s.version.version_id: s.score for s in ranked}
    for link in linked:
        if link.from_version_id not in source:
            continue
        if not link.neighbour and settings.decay <= 0:
            continue  # links not followed (the query still brought them)
        if link.neighbour:
            score = source[link.from_version_id] * settings.neighbour_decay
        else:
            score = source[link.from_version_id] * settings.decay * max(0.0, link.score)
        if weight is not None:
            score *= weight(link.version)
        vid = link.version.version_id
        direct = best.get(vid)
        if score >= threshold and (direct is None or direct.score < score):
            # The signals of a direct hit stay as they were; the score is the link's.
            vector, lexical = (direct.vector_score, direct.lexical_score) if direct else (0, 0)
            best[vid] = ScoredFact(link.version, score, vector, lexical)
    return best_first(best.values())[:top_k]
