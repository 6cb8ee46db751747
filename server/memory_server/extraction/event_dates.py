"""EventDates on top of dateparser 1.5.0: the date a fact's text speaks of, resolved against the
time it was said ("yesterday" said at 13:56 on 8 May 2023 is 7 May 2023).

dateparser does the finding and the arithmetic: `search_dates` finds the expressions, with
`RELATIVE_BASE` = the time the fact was said, and with `add_period` gives each one's grain
(`period`: day, week, month, year) from the same parse. What this module adds is which of
`search_dates`'s finds to believe. On the 2,760 LoCoMo turns it reports an expression in 524,
most of them not dates: "we" (read as Wednesday, 344 times), "now", "may", "a second",
"one-on-one", durations such as "4 years" or "a week" (read as that long ago). A find counts
only when it holds an anchor: a relative word (yesterday, today, tonight, tomorrow, ago, or
last / next / this / past before a unit or a day name), a year 1900-2099, or a month or day name
written out in full and capitalised. Texts without any anchor never reach dateparser: 245 of
the 2,760 turns hold one (543 held one of the anchors' words, such as "this" or "may").

The import and the first search (it loads its English data) cost a noticeable fraction of a
second, later searches about a millisecond; the grain is taken from the search rather than by
parsing the found expression again, which saves about a third of a dated text's CPU with the
same results (bench/README.md, "Figures behind the code"). The import is lazy, on the first
text that has an anchor word, and the caller runs `resolve` on a worker thread, off the event
loop.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from memory_server.memory.facts.model import EventPeriod, EventTime

_RELATIVE = r"(?:last|next|this|past)"
_UNITS = (
    r"(?:day|week|weekend|month|year|night|morning|afternoon|evening"
    r"|summer|winter|spring|fall)"
)
_DAYS = (
    r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday"
    r"|mon|tue|tues|wed|thu|thur|thurs|fri|sat|sun)"
)
_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
_FULL_DAYS = "Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday"
# What makes one of search_dates's finds a date rather than a duration or a stray word: a
# relative word, a relative word before a unit or day, a year...
_ANCHORS = (
    re.compile(r"\b(?:yesterday|today|tonight|tomorrow|ago)\b", re.IGNORECASE),
    re.compile(rf"\b{_RELATIVE}\s+(?:{_UNITS}|{_DAYS})s?\b", re.IGNORECASE),
    re.compile(r"\b(?:19|20)\d\d\b"),
)
# ... or a month or day name. Case-sensitive: "May 2023" and "on Friday", not "may" or "we".
_NAMES = re.compile(rf"\b(?:{_MONTHS}|{_FULL_DAYS})\b")
# "May I ask?": "May" before a pronoun is the verb, whatever dateparser finds.
_MAY_VERB = re.compile(r"\bMay\s+(?:I|we|you|he|she|they)\b")
_PERIODS = {p.value: p for p in EventPeriod}


def _anchored(phrase: str, text: str) -> bool:
    """Whether one of search_dates's finds in `text` holds an anchor."""
    if any(a.search(phrase) for a in _ANCHORS):
        return True
    names = _NAMES.findall(phrase)
    if names != ["May"]:
        return bool(names)
    # The find's only anchor is "May": a date unless each "May" of the text is the verb.
    return len(_MAY_VERB.findall(text)) < text.count("May")


class DateparserEvents:
    """The domain's EventDates (memory.ports), English only, thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._search: Any = None

    @property
    def name(self) -> str:
        return "dateparser"

    def needs_resolving(self, text: str) -> bool:
        """Cheap: whether `text` could hold an anchored time expression."""
        return _NAMES.search(text) is not None or any(a.search(text) for a in _ANCHORS)

    def resolve(self, text: str, said_at: datetime) -> EventTime | None:
        """The first anchored time expression of `text`, resolved against `said_at`."""
        if not self.needs_resolving(text):
            return None
        search = self._load()
        base = said_at.astimezone(UTC).replace(tzinfo=None)
        settings = {
            "RELATIVE_BASE": base,
            "PREFER_DATES_FROM": "past",
            "RETURN_AS_TIMEZONE_AWARE": False,
            "TIMEZONE": "UTC",
        }
        try:
            found: Sequence[tuple[str, datetime, str | None]] | None = search(
                text, languages=["en"], settings=settings, add_period=True
            )
        except (OverflowError, ValueError):  # "tomorrow" said on 9999-12-31, say
            return None
        for phrase, at, period in found or ():
            if at is None or not _anchored(phrase, text):
                continue
            # "time" (an hour of that day) is a day at this grain.
            return EventTime(at.replace(tzinfo=UTC), _PERIODS.get(period or "day", EventPeriod.DAY))
        return None

    def _load(self) -> Any:
        with self._lock:
            if self._search is None:
                from dateparser.search import search_dates

                self._search = search_dates
            return self._search
