"""Compaction: folding a conversation's oldest turns into its rolling summary.

It runs outside the scope's actor on purpose: a summarizer may be an LLM call of seconds, and
holding the actor that long would make every later write of the user wait. Running outside is
safe because messages are never deleted and a summary version is stored only when it moves the
watermark forward (the store checks that in the same statement), so two compactions racing on
one conversation can only each leave a correct summary, never a gap.
"""

from __future__ import annotations

import asyncio
import logging

from memory_server.memory.background import finish_or_cancel
from memory_server.memory.conversation.model import Summary
from memory_server.memory.conversation.stm import StmBudget, plan_fold, summary_unit
from memory_server.memory.errors import Unavailable
from memory_server.memory.identity import Scope
from memory_server.memory.ports import ConversationStore, Summarizer, SummaryTurn, TokenCounter

log = logging.getLogger(__name__)

_Key = tuple[Scope, str]


class Compactor:
    def __init__(
        self,
        *,
        store: ConversationStore,
        counter: TokenCounter,
        summarizer: Summarizer,
        budget: StmBudget,
        max_concurrent: int = 4,
    ) -> None:
        self._store = store
        self.counter = counter
        self._summarizer = summarizer
        self.budget = budget
        self._slots = asyncio.Semaphore(max_concurrent)
        self._running: dict[_Key, asyncio.Task[None]] = {}
        self._again: set[_Key] = set()
        self._closed = False
        self.failures = 0

    async def compact(
        self, scope: Scope, conversation_id: str, timeout_s: float | None = None
    ) -> int:
        """Fold the oldest turns until the rest fits; returns how many were folded."""
        summary, pending = await self._store.unsummarized(
            scope, conversation_id, self.budget.for_messages(0), timeout_s
        )
        fold = plan_fold(budget=self.budget, summary=summary, unsummarized=pending)
        if not fold:
            return 0
        limit = self.budget.summary_max_tokens
        text = await self._summarizer.summarize(
            summary.content if summary else "",
            [SummaryTurn(m.role.value, m.content) for m in fold],
            limit,
        )
        tokens = await asyncio.to_thread(self.counter.count, text)
        if tokens > limit:
            text = self.counter.truncate(text, limit)
            tokens = self.counter.count(text)
        new_summary = Summary(
            content=text,
            tokens=tokens,
            context_tokens=self.counter.count(summary_unit(text)),
            through_seq=fold[-1].seq,
            through_message_id=fold[-1].message_id,
        )
        await self._store.save_summary(
            scope, conversation_id, new_summary, self._summarizer.name, timeout_s
        )
        log.debug("compacted %d messages", len(fold))
        return len(fold)

    def schedule(self, scope: Scope, conversation_id: str) -> None:
        """Compact in the background. One task per conversation at a time: a request while it
        runs makes it go once more, so the last write is always looked at."""
        if self._closed:
            return
        key = (scope, conversation_id)
        if key in self._running:
            self._again.add(key)
            return
        task = asyncio.create_task(self._run(key), name="compaction")
        self._running[key] = task
        task.add_done_callback(lambda _: self._running.pop(key, None))

    async def _run(self, key: _Key) -> None:
        while True:
            self._again.discard(key)
            try:
                async with self._slots:
                    await self.compact(*key)
            except Unavailable as exc:
                # The next turn of the conversation compacts again.
                self.failures += 1
                log.warning("background compaction skipped: %s", exc)
            except Exception:
                self.failures += 1
                log.exception("background compaction failed")
            if key not in self._again or self._closed:
                return

    @property
    def pending(self) -> int:
        return len(self._running)

    async def close(self, timeout_s: float = 10.0) -> None:
        """Let running compactions finish (up to the timeout), then cancel. Idempotent."""
        self._closed = True
        if late := await finish_or_cancel(list(self._running.values()), timeout_s):
            log.warning("%d compactions cancelled at shutdown; the next write redoes them", late)
