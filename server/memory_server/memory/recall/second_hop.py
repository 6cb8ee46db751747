"""A second hop for questions that need two facts, without an LLM.

A question such as "What did Caroline research after the support group?" shares words with the
support-group fact, not with the fact that answers it; that one shares words with the first.
Multi-hop dense retrieval (Xiong et al., 2021) asks again with the question joined to the best
first-hop text. Recall does the same with both signals: the best `bridges` hits of the first
ranking are each joined to the question ("question bridge-text"), searched like a question (the
vector signal without the scope's common words, the lexical signal on every word), ranked with
the first question's subjects and time intent, and merged at the chain's score, the mean of its
two hops' scores (multi-hop dense retrieval scores a chain by their sum), times `weight`:

    score(hop) = weight * (score(bridge) + score(fact | question + bridge)) / 2

A fact found both ways keeps its better score; a bridge's own second-hop score is not counted
(it would only find itself). Below weight 1 a chain scores below the better of its two hops, so
the hop mostly fills the places below the first hop's best. Weight 0 turns the hop off; each
bridge costs one more search (embedding, index, lexical and versions queries).

Measured on LoCoMo dev (bench/README.md "Second hop"): at weight 0.5 R@10 75.2 (multi-hop 49.8)
against 75.0 (49.1) without; leave-one-conversation-out chooses 0 in every fold, and the hop
doubles a search's queries, so it is off by default. A score product, bridge * weight * score,
was tried first: at weight 0.5 it changed no top 10.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memory_server.memory.facts.model import FactVersion
from memory_server.memory.recall.rank import ScoredFact, best_first


@dataclass(frozen=True, slots=True)
class HopSettings:
    weight: float = 0.0  # 0: no second hop
    bridges: int = 1  # the best first-hop hits each joined to the question

    @property
    def enabled(self) -> bool:
        return self.weight > 0 and self.bridges > 0


def bridges(ranked: Sequence[ScoredFact], settings: HopSettings) -> list[ScoredFact]:
    """The first-hop hits the second hop starts from: the best `settings.bridges`."""
    return list(ranked[: settings.bridges]) if settings.enabled else []


def hop_question(question: str, bridge: FactVersion) -> str:
    """What the second hop asks: the question joined to the bridge's text."""
    return f"{question} {bridge.text}"


def merge(
    ranked: Sequence[ScoredFact],
    hops: Sequence[tuple[ScoredFact, Sequence[ScoredFact]]],
    settings: HopSettings,
    *,
    threshold: float,
) -> list[ScoredFact]:
    """`ranked` with each bridge's second-hop ranking merged in, deduplicated by version, best
    first, at least `threshold`. The signals of a first-hop hit stay as they were."""
    best: dict[str, ScoredFact] = {s.version.version_id: s for s in ranked}
    for bridge, found in hops:
        for hit in found:
            vid = hit.version.version_id
            if vid == bridge.version.version_id:
                continue
            score = settings.weight * (bridge.score + hit.score) / 2
            direct = best.get(vid)
            if score >= threshold and (direct is None or direct.score < score):
                vector, lexical = (direct.vector_score, direct.lexical_score) if direct else (0, 0)
                best[vid] = ScoredFact(hit.version, score, vector, lexical)
    return best_first(best.values())
