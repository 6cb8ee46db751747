"""The turn's use cases: start a turn (store the question, build its context, recall beside
the write), complete it (store the reply, then compaction and learning), a context without
storing, an import. The UI history is conversation/history.py.

Writes for a scope go through the injected ScopeExecutor (the scope's actor), so they happen in
the order they were accepted; reads go straight to the store. Other servers on the same
database have actors of their own: the store serializes a scope's writes across them, and a
turn's context is read by its message's position (seq), not by "everything so far".
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from memory_server.memory.conversation.compaction import Compactor
from memory_server.memory.conversation.model import (
    AppendOutcome,
    CompletedTurn,
    ContextCandidates,
    LongTermSection,
    MemoryContext,
    NewMessage,
    ReplyFields,
    Role,
    StartedTurn,
    StoredMessage,
)
from memory_server.memory.conversation.stm import (
    EpisodeRoom,
    build_context,
    message_unit,
)
from memory_server.memory.identity import Scope
from memory_server.memory.learning.learn import Learning, LearnInput
from memory_server.memory.ports import (
    ConversationStore,
    ScopeExecutor,
    SecretFilter,
)
from memory_server.memory.recall.episodes import EpisodeRecall
from memory_server.memory.recall.search import Recall

log = logging.getLogger(__name__)

# Texts longer than this are tokenized on a worker thread, not on the event loop.
_INLINE_TOKENIZE_CHARS = 8192
# Scopes whose has-facts (and has-episodes) answer a server keeps (~230 bytes each by
# tracemalloc): only the choice of recalling beside the write or after it depends on it, never
# what is recalled.
_SCOPES_REMEMBERED = 100_000
_NOTHING = (False, False)


async def _cancelled(task: asyncio.Future[LongTermSection] | None) -> None:
    """Cancel a recall started ahead and wait for it to end (it never raises otherwise)."""
    if task is not None:
        task.cancel()  # nothing when it is done already
        await asyncio.gather(task, return_exceptions=True)


def new_message_id() -> str:
    return str(uuid.uuid4())


class Turns:
    def __init__(
        self,
        *,
        store: ConversationStore,
        executor: ScopeExecutor,
        compactor: Compactor,
        inline_after_reply: bool,
        recall: Recall | None = None,
        learning: Learning | None = None,
        redactor: SecretFilter | None = None,
        episodes: EpisodeRecall | None = None,
    ) -> None:
        self._store = store
        # Secrets in a message are replaced by typed placeholders before it is stored (None:
        # messages are kept verbatim, `redact_secrets` off).
        self._redactor = redactor
        # Long-term memory: None without it (memory_config's long-term part off).
        self._recall = recall
        self._learning = learning
        # Episodes (messages recalled across conversations): None when `episodes` is off.
        self._episodes = episodes
        # Whether a scope's last turn found live facts, and messages to recall as episodes: a
        # turn in a scope known to have them starts recall beside its write, instead of after
        # it (`start_turn`).
        self._has_memory: OrderedDict[Scope, tuple[bool, bool]] = OrderedDict()
        self._executor = executor
        # Short-term memory: the budget and its counter are the compactor's, so a context and
        # the folds that keep it in budget count the same tokens.
        self.compactor = compactor
        # Compaction and fact extraction before CompleteTurn returns (fact_extract_async off).
        self._inline_after_reply = inline_after_reply

    async def close(self, timeout_s: float = 10.0) -> None:
        """Finish background compactions (and extractions). Idempotent."""
        await self.compactor.close(timeout_s)
        if self._learning is not None:
            await self._learning.close(timeout_s)

    async def count_tokens(self, text: str) -> int:
        if len(text) <= _INLINE_TOKENIZE_CHARS:
            return self.compactor.counter.count(text)
        return await asyncio.to_thread(self.compactor.counter.count, text)

    async def redact(self, text: str, where: str = "before storing a message") -> str:
        """The text as it may be stored: every secret the filter finds replaced by its typed
        placeholder ("[redacted: api key]"), unless messages are kept verbatim."""
        if self._redactor is None or not text:
            return text
        if len(text) <= _INLINE_TOKENIZE_CHARS:
            redacted = self._redactor.redact(text)
        else:
            redacted = await asyncio.to_thread(self._redactor.redact, text)
        if redacted.secrets_found:
            # Counts only: neither the secret nor the message reaches the log.
            log.info("redacted %d secret(s) %s", redacted.secrets_found, where)
        return redacted.text

    async def _counted(self, message: NewMessage) -> NewMessage:
        """The message as stored: secrets redacted, its token counts, and an id (generated
        unless the client chose)."""
        content = await self.redact(message.content)
        return replace(
            message,
            content=content,
            tokens=await self.count_tokens(content),
            context_tokens=await self.count_tokens(message_unit(message.role, content)),
            message_id=message.message_id or new_message_id(),
        )

    # --- turns -----------------------------------------------------------------------------

    async def start_turn(
        self,
        scope: Scope,
        conversation_id: str,
        content: str,
        *,
        message_id: str = "",
        conversation_name: str = "",
        created_at: datetime | None = None,
        timeout_s: float | None = None,
    ) -> StartedTurn:
        message = await self._counted(
            NewMessage(
                Role.USER,
                content,
                tokens=0,
                context_tokens=0,
                message_id=message_id,
                created_at=created_at,
            )
        )

        async def job() -> tuple[AppendOutcome, ContextCandidates]:
            outcome = await self._store.append_messages(
                scope, conversation_id, [message], conversation_name, timeout_s
            )
            # The context excludes the message just stored (the planner has it already) and
            # anything after it (a retried StartTurn returns the context it first returned).
            candidates = await self._store.context_candidates(
                scope,
                conversation_id,
                outcome.messages[0].seq,
                self.compactor.budget.budget_tokens,
                timeout_s,
            )
            return outcome, candidates

        # Recall embeds the question as stored: a secret in it never reaches the embedder.
        # In a scope whose last turn had live facts (or episodes), recall runs beside the
        # write (it reads only the question and the facts); elsewhere it waits for the write's
        # answer, so a scope without either never embeds anything.
        known = self._has_memory.get(scope, _NOTHING)
        recall = None
        if any(known):
            recall = asyncio.ensure_future(
                self._long_term(scope, message.content, known, timeout_s=timeout_s)
            )
        try:
            outcome, candidates = await self._executor.run(scope, job)
        except BaseException:
            await _cancelled(recall)
            raise
        has = (candidates.has_facts, candidates.has_episodes)
        self._note_memory(scope, has)
        if has != known:  # facts or episodes came or went since the last turn: recall anew
            await _cancelled(recall)
            recall = None
        context = await self._assemble(
            scope,
            candidates,
            message.content,
            recall,
            before_seq=outcome.messages[0].seq,
            timeout_s=timeout_s,
        )
        return StartedTurn(outcome.messages[0], context, outcome.conversation_created)

    async def complete_turn(
        self,
        scope: Scope,
        conversation_id: str,
        content: str,
        reply: ReplyFields,
        *,
        message_id: str = "",
        created_at: datetime | None = None,
        timeout_s: float | None = None,
    ) -> CompletedTurn:
        message = await self._counted(
            NewMessage(
                Role.ASSISTANT,
                content,
                tokens=0,
                context_tokens=0,
                message_id=message_id,
                model=reply.model,
                parent_id=reply.parent_id,
                response_time_seconds=reply.response_time_seconds,
                created_at=created_at,
            )
        )

        async def job() -> StoredMessage:
            outcome = await self._store.append_messages(
                scope, conversation_id, [message], "", timeout_s, create=False
            )
            return outcome.messages[0]

        stored = await self._executor.run(scope, job)
        inline = await self._after_write(scope, conversation_id)
        await self._learn_from(scope, conversation_id, stored, timeout_s)
        return CompletedTurn(stored, inline)

    async def _learn_from(
        self, scope: Scope, conversation_id: str, reply: StoredMessage, timeout_s: float | None
    ) -> None:
        """Fact extraction after a reply: before returning, or in the background."""
        if self._learning is None:
            return

        async def turn() -> LearnInput | None:
            question = await self._store.user_message_before(
                scope, conversation_id, reply.seq, reply.parent_id, timeout_s
            )
            if question is None:
                return None
            return LearnInput(
                scope,
                conversation_id,
                question.message_id,
                question.content,
                reply.content,
                said_at=question.created_at,
            )

        if not self._inline_after_reply:
            self._learning.learn_soon(turn)
        elif (found := await turn()) is not None:
            await self._learning.learn(found)

    async def append_messages(
        self,
        scope: Scope,
        conversation_id: str,
        messages: Sequence[NewMessage],
        *,
        conversation_name: str = "",
        timeout_s: float | None = None,
    ) -> AppendOutcome:
        counted = [await self._counted(m) for m in messages]

        async def job() -> AppendOutcome:
            return await self._store.append_messages(
                scope, conversation_id, counted, conversation_name, timeout_s
            )

        outcome = await self._executor.run(scope, job)
        if outcome.inserted:
            await self._after_write(scope, conversation_id)
        return outcome

    async def _after_write(self, scope: Scope, conversation_id: str) -> bool:
        """Compaction after a write: before returning (True), or in the background."""
        if self._inline_after_reply:
            await self.compactor.compact(scope, conversation_id)
            return True
        self.compactor.schedule(scope, conversation_id)
        return False

    # --- reads -----------------------------------------------------------------------------

    async def get_context(
        self, scope: Scope, conversation_id: str, question: str, timeout_s: float | None = None
    ) -> tuple[MemoryContext, bool]:
        candidates = await self._store.context_candidates(
            scope, conversation_id, None, self.compactor.budget.budget_tokens, timeout_s
        )
        # Stored nowhere and counted as no recall, but embedded (maybe remotely): redacted.
        question = await self.redact(question, "in a context question")
        context = await self._assemble(scope, candidates, question, seen=False, timeout_s=timeout_s)
        return context, candidates.conversation_exists

    def _note_memory(self, scope: Scope, has: tuple[bool, bool]) -> None:
        self._has_memory[scope] = has
        self._has_memory.move_to_end(scope)
        if len(self._has_memory) > _SCOPES_REMEMBERED:
            self._has_memory.popitem(last=False)

    async def _long_term(
        self,
        scope: Scope,
        question: str,
        has: tuple[bool, bool],
        *,
        seen: bool = True,
        timeout_s: float | None = None,
    ) -> LongTermSection:
        """The facts (when the scope `has` live ones) and the episode candidates (when it has
        messages out of the window) the question brings up, both at once. Neither raises:
        each degrades to nothing."""
        has_facts, has_episodes = has
        facts = None
        if has_facts and self._recall is not None:
            facts = self._recall.recall(scope, question, seen=seen, timeout_s=timeout_s)
        episodes = None
        if has_episodes and self._episodes is not None:
            episodes = self._episodes.recall(scope, question, timeout_s=timeout_s)
        if facts is None:
            return LongTermSection(episodes=await episodes if episodes is not None else [])
        if episodes is None:
            return await facts
        section, found = await asyncio.gather(facts, episodes)
        return replace(section, episodes=found)

    async def _assemble(
        self,
        scope: Scope,
        candidates: ContextCandidates,
        question: str,
        recall: asyncio.Future[LongTermSection] | None = None,
        *,
        before_seq: int | None = None,
        seen: bool = True,
        timeout_s: float | None = None,
    ) -> MemoryContext:
        """`recall`: started ahead with what the scope had then (the caller passes it only
        when that is what it has now)."""
        long_term = LongTermSection()
        has = (candidates.has_facts, candidates.has_episodes)
        # A scope with neither live facts nor episodes skips recall entirely: no embedding, no
        # index, no model.
        if recall is not None or any(has):
            try:
                long_term = await (
                    recall or self._long_term(scope, question, has, seen=seen, timeout_s=timeout_s)
                )
            except BaseException:
                await _cancelled(recall)
                raise
        room = EpisodeRoom()
        if self._episodes is not None:
            room = EpisodeRoom(
                self._episodes.settings.top_k, self._episodes.settings.context_tokens
            )
        return build_context(
            counter=self.compactor.counter,
            budget=self.compactor.budget,
            summary=candidates.summary,
            newest_first=candidates.newest_first,
            unsummarized_count=candidates.unsummarized_count,
            long_term=long_term,
            episode_room=room,
            before_seq=before_seq,
        )
