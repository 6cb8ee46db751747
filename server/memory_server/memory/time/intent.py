"""Time intent: a question that asks when ("When did…", "What year…", "How long ago…",
"…before/after the move?") weighs the facts whose text names a date (an event time resolved at
write time, memory.facts.EventTime), because those are the ones that can answer it; and a
question that names a date ("in March 2023", "on 1 May, 2022") weighs the facts about that time:
those whose event date, or else whose valid_from (when they were said), falls in it.

Each weight enters the score as one more vote of the probabilistic OR (memory.recall.fuse), so
scores stay in [0, 1], a weighted fact never passes one that the question matches much better,
and a question with neither ranks exactly as before. The default weight was chosen from the flat
region of a sweep on LoCoMo's dev split (bench/README.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from memory_server.memory.facts.model import EventPeriod, EventTime, FactVersion

_TIME_INTENT = re.compile(
    r"\b(?:when|what (?:year|month|date|day|time)|which (?:year|month|day)|how long ago"
    r"|how long|how many (?:years|months|weeks|days)|before|after|since|until)\b",
    re.IGNORECASE,
)


def has_time_intent(question: str) -> bool:
    return _TIME_INTENT.search(question) is not None


def span(event: EventTime) -> tuple[datetime, datetime]:
    """The interval an event time stands for, at its grain: its day, the seven days from its
    date, its calendar month, its calendar year."""
    day = event.at.replace(hour=0, minute=0, second=0, microsecond=0)
    try:
        return _span(day, event.period)
    except (OverflowError, ValueError):  # the year 9999: open-ended
        return day, datetime.max.replace(tzinfo=UTC)


def _span(day: datetime, period: EventPeriod) -> tuple[datetime, datetime]:
    if period is EventPeriod.YEAR:
        start = day.replace(month=1, day=1)
        return start, start.replace(year=start.year + 1)
    if period is EventPeriod.MONTH:
        start = day.replace(day=1)
        end = start.replace(year=start.year + 1, month=1) if start.month == 12 else None
        return start, end or start.replace(month=start.month + 1)
    if period is EventPeriod.WEEK:
        return day, day + timedelta(days=7)
    return day, day + timedelta(days=1)


def _about(version: FactVersion) -> tuple[datetime, datetime]:
    event = version.event
    if event is not None:
        return span(event)
    said = version.valid_from
    # PostgreSQL's -infinity (AddFact at 0001-01-01T00:00:00Z) comes back naive.
    return span(EventTime(said if said.tzinfo else said.replace(tzinfo=UTC), EventPeriod.DAY))


def dated_vote(
    question: str, weight: float, asked: EventTime | None = None
) -> Callable[[FactVersion], float] | None:
    """The extra vote each fact gets for `question`, whose own date (if it names one) is
    `asked`: `weight` for a dated fact when the question asks about time, `weight` again
    (fused) for a fact about the asked time; None when neither applies (rank as without)."""
    intent = has_time_intent(question)
    if weight <= 0.0 or (not intent and asked is None):
        return None
    window = span(asked) if asked is not None else None

    def vote(version: FactVersion) -> float:
        dated = weight if intent and version.event_at is not None else 0.0
        if window is None:
            return dated
        start, end = _about(version)
        inside = weight if start < window[1] and window[0] < end else 0.0
        return 1.0 - (1.0 - dated) * (1.0 - inside)

    return vote
