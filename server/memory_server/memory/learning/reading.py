"""Reading a turn for facts: secrets scrubbed first, then the extractor (an LLM's, falling back
to the rules when it is unavailable), then each candidate dated from when it was said."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from memory_server.memory.errors import Unavailable
from memory_server.memory.facts.model import Candidate
from memory_server.memory.ports import (
    EventDates,
    ExtractionInput,
    Extractor,
    NoTelemetry,
    Scrubbed,
    SecretFilter,
    Telemetry,
)
from memory_server.memory.time.event_time import said_when

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ReadTurn:
    """What a turn says: its candidate facts, dated, and the extractor that found them."""

    candidates: list[Candidate]
    extractor: str


@dataclass(frozen=True, kw_only=True, eq=False)
class TurnReader:
    secrets: SecretFilter
    extractor: Extractor
    # An LLM outage must not lose the turn's facts: the rules still see the obvious.
    fallback: Extractor | None = None
    events: EventDates | None = None
    telemetry: Telemetry = field(default_factory=NoTelemetry)

    def _scrub_both(self, user_text: str, assistant_text: str) -> tuple[Scrubbed, Scrubbed]:
        return self.secrets.scrub(user_text), self.secrets.scrub(assistant_text)

    async def scrub(self, user_text: str, assistant_text: str) -> tuple[str, str] | None:
        """Both texts with every secret taken out, or None when the user's holds nothing else
        (then there is nothing to learn, and nothing need be read to learn it)."""
        # A worker thread: a long turn's scan is pure CPU (and may go to the filter's process).
        user, assistant = await asyncio.to_thread(self._scrub_both, user_text, assistant_text)
        found = user.secrets_found + assistant.secrets_found
        if found:
            self.telemetry.secrets_dropped(found)
            log.info("dropped %d secret(s) before extraction", found)
        if not user.text.strip():
            return None
        return user.text, assistant.text

    async def extract(
        self,
        user_text: str,
        assistant_text: str,
        recalled: Sequence[str],
        said_at: datetime | None,
    ) -> ReadTurn | None:
        """The scrubbed turn's candidates, or None when it holds nothing to learn. `recalled`:
        the live facts' texts, so the extractor does not keep what is known already."""
        turn_input = ExtractionInput(user_text, assistant_text, recalled=list(recalled))
        extractor = self.extractor
        try:
            candidates = await extractor.extract(turn_input)
        except Unavailable as exc:
            if self.fallback is None:
                raise
            log.warning(
                "extractor %s unavailable (%s); using %s", extractor.name, exc, self.fallback.name
            )
            extractor = self.fallback
            candidates = await extractor.extract(turn_input)
        if not candidates:
            return None
        return ReadTurn(await said_when(candidates, said_at, self.events), extractor.name)
