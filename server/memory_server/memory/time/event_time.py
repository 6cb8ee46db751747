"""Event time on every fact: a fact is valid from when it was said (the message's time, which
an AppendMessages import keeps from the original; AddFact's valid time), and the date its text
speaks of ("yesterday", "last week", "next month", "in 2022") is resolved against that moment,
so that "When did she go?" can be answered from memory alone. A question's own date is
resolved the same way, for recall (memory.time.intent)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime

from memory_server.memory.facts.model import Candidate, EventTime
from memory_server.memory.ports import EventDates


async def said_when(
    candidates: Sequence[Candidate], said_at: datetime | None, events: EventDates | None
) -> list[Candidate]:
    """The candidates stamped with when they were said (None: now, at write), and with the
    date their text speaks of, resolved against that time (`dated`)."""
    return await dated([replace(c, said_at=said_at) for c in candidates], events)


async def dated(candidates: Sequence[Candidate], events: EventDates | None) -> list[Candidate]:
    """The candidates with the date their text speaks of, each resolved against its own
    `said_at` (None: now). Resolution runs on one worker thread for all of them (dateparser
    is CPU-bound), and only for texts holding a time word."""
    if events is None or not any(events.needs_resolving(c.text) for c in candidates):
        return list(candidates)
    now = datetime.now(UTC)

    def resolve() -> list[Candidate]:
        return [
            replace(c, event=events.resolve(c.text, c.said_at or now))
            if events.needs_resolving(c.text)
            else c
            for c in candidates
        ]

    return await asyncio.to_thread(resolve)


async def asked_when(question: str, events: EventDates | None) -> EventTime | None:
    """The date a question names ("in March 2023", "on 1 May, 2022"), resolved against now;
    None when it names none. Only a question with a time word reaches the resolver, on a worker
    thread."""
    if events is None or not events.needs_resolving(question):
        return None
    return await asyncio.to_thread(events.resolve, question, datetime.now(UTC))
