"""Choosing the semantic links of the versions an outbox batch indexes.

Each live version of the batch is linked to its most similar live versions of the same scope:
cosine at or over `threshold`, at most `max_per_fact`. Candidates are what the index already
holds (one `neighbours` request per scope in the batch, with the batch's vectors) and the
batch's other versions of the scope (their vectors are in hand, compared here), so a batch of
facts about one thing links them to each other although none of them is searchable yet.
Nothing here runs on a turn's path: the outbox actor calls it after the turn committed."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from memory_server.memory.ports import VectorIndex

# (source version, target version, cosine); the source is the version being indexed.
LinkPair = tuple[str, str, float]


@dataclass(frozen=True, slots=True)
class LinkSettings:
    # Measured on the LoCoMo dev split (bench/locomo_links.py, bench/README.md).
    threshold: float = 0.6
    max_per_fact: int = 5  # 0: write no links

    @property
    def enabled(self) -> bool:
        return self.max_per_fact > 0


@dataclass(frozen=True, slots=True)
class Indexed:
    """A live version the batch indexes, with its fresh vector."""

    version_id: str
    scope_hash: str
    vector: Sequence[float]


async def choose_links(
    index: VectorIndex, items: Sequence[Indexed], settings: LinkSettings
) -> list[LinkPair]:
    """The links of `items`, each pair once (the better score of its two directions)."""
    if not settings.enabled or not items:
        return []
    by_scope: dict[str, list[Indexed]] = defaultdict(list)
    for item in items:
        by_scope[item.scope_hash].append(item)
    pairs: dict[tuple[str, str], LinkPair] = {}
    m = settings.max_per_fact
    for scope_hash, group in by_scope.items():
        # One more than m: a replayed batch finds the version itself among its neighbours.
        found = await index.neighbours(scope_hash, [g.vector for g in group], m + 1)
        raw = np.asarray([g.vector for g in group], dtype=np.float64)
        norms = np.linalg.norm(raw, axis=1, keepdims=True)
        unit = raw / np.where(norms == 0, 1.0, norms)
        among = unit @ unit.T
        for i, item in enumerate(group):
            candidates: dict[str, float] = {h.version_id: h.cosine for h in found[i]}
            for j, other in enumerate(group):
                if j != i:
                    candidates[other.version_id] = float(among[i, j])
            candidates.pop(item.version_id, None)
            best = sorted(
                ((c, v) for v, c in candidates.items() if c >= settings.threshold),
                key=lambda cv: (-cv[0], cv[1]),
            )[:m]
            for cosine, target in best:
                key = (min(item.version_id, target), max(item.version_id, target))
                if key not in pairs or pairs[key][2] < cosine:
                    pairs[key] = (item.version_id, target, round(cosine, 6))
    return list(pairs.values())
