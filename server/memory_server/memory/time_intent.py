"""Time intent: a question that asks when ("When did…", "What year…", "How long ago…",
"…before/after the move?") weighs the facts whose text names a date (an event time resolved at
write time, memory.facts.EventTime), because those are the ones that can answer it.

The weight enters the score as one more vote of the probabilistic OR (memory.recall.fuse), so
scores stay in [0, 1], a dated fact never passes an undated one that the question matches much
better, and a question without time intent ranks exactly as before. The default weight was
chosen from the flat region of a sweep on LoCoMo's dev split (bench/README.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from memory_server.memory.facts import FactVersion

_TIME_INTENT = re.compile(
    r"\b(?:when|what (?:year|month|date|day|time)|which (?:year|month|day)|how long ago"
    r"|how long|how many (?:years|months|weeks|days)|before|after|since|until)\b",
    re.IGNORECASE,
)


def has_time_intent(question: str) -> bool:
    return _TIME_INTENT.search(question) is not None


def dated_vote(question: str, weight: float) -> Callable[[FactVersion], float] | None:
    """The extra vote each fact gets for `question`: `weight` for a dated fact when the
    question asks about time, else nothing (None: rank as without it)."""
    if weight <= 0.0 or not has_time_intent(question):
        return None
    return lambda version: weight if version.event_at is not None else 0.0
