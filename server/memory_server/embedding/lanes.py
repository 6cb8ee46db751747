"""The embedding pool's two queues: foreground texts first, background texts when none waits.

Foreground is a turn's question or a fact being reconciled: someone waits on it now. Background
is the outbox indexing facts and episodes: nobody waits on one text, and an imported history
queues thousands. A batch is all foreground (up to the pool's batch size) or all background, up
to BACKGROUND_BATCH_CHARS. Where both lanes share one model, a background batch is taken only
when no foreground text waits, so a question that arrives behind an imported history waits for
one small batch, not for the history.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

# A background batch stops growing at this many characters (at least one text): about four of
# the outbox's longest episode texts (memory.identity.EPISODE_EMBED_CHARS), tens of
# milliseconds of MiniLM on two idle cores, the most a question waits behind background work
# where both lanes share the model.
BACKGROUND_BATCH_CHARS = 4000


@dataclass(slots=True)
class Call:
    """One `embed` call: its future and the vectors gathered so far."""

    future: asyncio.Future[list[list[float]]]
    results: list[list[float] | None]
    missing: int


@dataclass(slots=True)
class Item:
    """One queued text."""

    call: Call
    index: int
    text: str
    queued_at: float  # loop time


class Lanes:
    """The foreground and background queues of one pool."""

    def __init__(self) -> None:
        self.foreground: deque[Item] = deque()
        self.background: deque[Item] = deque()

    def __len__(self) -> int:
        return len(self.foreground) + len(self.background)

    def take(self, max_batch: int, *, background: bool = True) -> list[Item]:
        """Up to `max_batch` foreground texts whose callers still wait; when none waits (and
        `background`), a background batch."""
        batch: list[Item] = []
        while self.foreground and len(batch) < max_batch:
            item = self.foreground.popleft()
            if not item.call.future.done():
                batch.append(item)
        if batch or not background:
            return batch
        return self.take_background(max_batch)

    def take_background(self, max_batch: int) -> list[Item]:
        """Background texts whose callers still wait, up to `max_batch` texts and
        BACKGROUND_BATCH_CHARS characters (at least one text)."""
        batch: list[Item] = []
        chars = 0
        while self.background and len(batch) < max_batch:
            item = self.background[0]
            if batch and chars + len(item.text) > BACKGROUND_BATCH_CHARS:
                break
            self.background.popleft()
            if not item.call.future.done():
                batch.append(item)
                chars += len(item.text)
        return batch

    def drain(self) -> Iterable[Item]:
        """Every queued item, both lanes emptied."""
        items = [*self.foreground, *self.background]
        self.foreground.clear()
        self.background.clear()
        return items
