"""Long-term memory's value types: facts with bitemporal versions, extraction candidates and
reconciliation decisions.

A fact has a stable id and immutable versions. A version is believed at (valid time V,
transaction time T) when `recorded_at <= T < superseded_at` and `valid_from <= V < valid_to`
(None = open, i.e. infinity). "Now" is both at now.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime


class FactKind(enum.StrEnum):
    PREFERENCE = "preference"
    DECISION = "decision"
    GOAL = "goal"
    IDENTITY = "identity"
    OTHER = "other"


class Decision(enum.StrEnum):
    ADD = "ADD"  # a new fact
    UPDATE = "UPDATE"  # supersedes `target` (the world changed: "I now prefer tea")
    DELETE = "DELETE"  # retracts `target` ("forget that I…", "I no longer…")
    NONE = "NONE"  # already known (duplicate of `target`)


class EventPeriod(enum.StrEnum):
    """The grain of a resolved event time: "yesterday" is a day, "last month" a month."""

    DAY = "day"
    WEEK = "week"
    MONTH = "month"
    YEAR = "year"


@dataclass(frozen=True, slots=True)
class EventTime:
    """When what a fact says happened (or will), resolved from a time expression in its text
    against the time it was said."""

    at: datetime
    period: EventPeriod

    def label(self) -> str:
        """The date at its grain: 2023-05-07, week of 2023-05-01, 2023-05, 2022."""
        if self.period is EventPeriod.YEAR:
            return f"{self.at:%Y}"
        if self.period is EventPeriod.MONTH:
            return f"{self.at:%Y-%m}"
        if self.period is EventPeriod.WEEK:
            return f"week of {self.at:%Y-%m-%d}"
        return f"{self.at:%Y-%m-%d}"


@dataclass(frozen=True, slots=True)
class Candidate:
    """A durable statement found in a turn, before reconciliation."""

    text: str  # the fact as it will be stored, e.g. "Prefers concise bullet points"
    kind: FactKind
    # True for a retraction ("forget that I like jazz"): `text` then describes what to retract.
    retraction: bool = False
    # True when the statement announces a change ("actually", "now", "anymore", "instead").
    change: bool = False
    # True for a standing instruction about how to answer ("always answer in French",
    # "prefers concise bullet points"): recalled into every turn, whatever the question.
    standing: bool = False
    # When it was said (the message's time, AddFact's valid time): the new version's
    # valid_from, and the moment an UPDATE or DELETE changes the world. None = now.
    said_at: datetime | None = None
    # The date its text speaks of ("yesterday" said on 8 May 2023 is 7 May 2023), if any.
    event: EventTime | None = None
    # True for a self statement (memory/learning/self_statements.py): the user's own words about
    # their life, which no rule form read; the precise path judges these most strictly.
    self_statement: bool = False


@dataclass(frozen=True, slots=True)
class LiveFact:
    """A fact's current version, as reconciliation sees it."""

    fact_id: str
    version_id: str
    text: str
    kind: FactKind


@dataclass(frozen=True, slots=True)
class ReconciledCandidate:
    decision: Decision
    candidate: Candidate
    target_fact_id: str = ""  # set for UPDATE, DELETE and NONE


@dataclass(frozen=True, slots=True)
class FactVersion:
    version_id: str
    fact_id: str
    text: str
    kind: FactKind
    valid_from: datetime
    valid_to: datetime | None
    recorded_at: datetime
    superseded_at: datetime | None
    conversation_id: str = ""
    message_id: str = ""
    extractor: str = ""
    standing: bool = False
    event_at: datetime | None = None
    event_period: str = ""  # an EventPeriod value, "" when event_at is None

    @property
    def event(self) -> EventTime | None:
        if self.event_at is None:
            return None
        return EventTime(self.event_at, EventPeriod(self.event_period))


@dataclass(frozen=True, slots=True)
class NewFact:
    """A fact to add by hand (AddFact, AddFacts): true from `valid_from` (None: now), said in
    `conversation_id` (provenance; empty: none)."""

    text: str
    kind: FactKind
    valid_from: datetime | None = None
    conversation_id: str = ""


@dataclass(frozen=True, slots=True)
class Provenance:
    conversation_id: str = ""
    message_id: str = ""
    extractor: str = ""


@dataclass(frozen=True, slots=True)
class AppliedChange:
    decision: Decision
    fact_id: str
    version_id: str  # the new live version; empty for DELETE and NONE


@dataclass(frozen=True, slots=True)
class HistoryEvent:
    event: str
    at: datetime
    version_id: str
    conversation_id: str
    message_id: str
    extractor: str
    detail: str
