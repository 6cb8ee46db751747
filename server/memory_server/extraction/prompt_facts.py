"""Which stored facts an LLM prompt shows when there are too many, and how long each may be
(mem0_extractor, llm_reconciler): the texts sharing most content words with the turn, clipped."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from memory_server.memory.learning.words import content_words


def most_related(texts: Sequence[str], queries: Sequence[str], limit: int) -> list[int]:
    """Indexes of at most `limit` of `texts`: those sharing the most content words with any
    query first, ties in the given order."""
    if limit <= 0:
        return []
    if len(texts) <= limit:
        return list(range(len(texts)))
    asked = [content_words(q) for q in queries]
    postings: dict[str, list[int]] = {}
    for i, q in enumerate(asked):
        for word in q:
            postings.setdefault(word, []).append(i)
    scores: list[float] = []
    for text in texts:
        mine = content_words(text)
        hits = Counter(i for word in mine for i in postings.get(word, ()))
        scores.append(max((n / len(mine) for n in hits.values()), default=0.0) if mine else 0.0)
    order = sorted(range(len(texts)), key=lambda i: (-scores[i], i))
    return order[:limit]


_SPACE_RE = re.compile(r"\s+")


def clip(text: str, max_chars: int) -> str:
    """`text` on one line, at most `max_chars` characters (an ellipsis marks a cut)."""
    text = _SPACE_RE.sub(" ", text).strip()
    return text if len(text) <= max_chars else text[: max(0, max_chars - 1)].rstrip() + "…"
