"""Conversation memory's ports: counting tokens, summarizing, the per-scope executor, and the
conversation store."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from memory_server.memory.conversation.model import (
    AppendOutcome,
    ContextCandidates,
    ConversationInfo,
    Feedback,
    FeedbackEntry,
    NewMessage,
    Page,
    PageRequest,
    StoredMessage,
    Summary,
)
from memory_server.memory.identity import Scope

T = TypeVar("T")
Item = TypeVar("Item")


class TokenCounter(Protocol):
    """Counts tokens the way the planner's model does (tiktoken cl100k_base)."""

    def count(self, text: str) -> int: ...

    def truncate(self, text: str, max_tokens: int) -> str:
        """The longest prefix of `text` with at most `max_tokens` tokens."""
        ...


@dataclass(frozen=True, slots=True)
class SummaryTurn:
    """One message being folded into a rolling summary."""

    role: str  # "user" | "assistant" | "system"
    content: str


class Summarizer(Protocol):
    """Folds turns into a rolling summary of at most `max_tokens` tokens."""

    @property
    def name(self) -> str:
        """Recorded with each summary (e.g. "extractive-v1", "llm:gpt-4o-mini")."""
        ...

    async def summarize(self, previous: str, turns: Sequence[SummaryTurn], max_tokens: int) -> str:
        """Return the new summary covering `previous` followed by `turns` (oldest first)."""
        ...


class ScopeExecutor(Protocol):
    """Serializes writes per (username, graphname): the actor registry implements it."""

    async def run(self, scope: Scope, job: Callable[[], Awaitable[T]]) -> T:
        """Run `job` in the scope's order; raises Overloaded when the mailbox is full."""
        ...

    async def run_batched(
        self,
        scope: Scope,
        key: str,
        item: Item,
        batch: Callable[[list[Item]], Awaitable[Sequence[T | Exception]]],
    ) -> T:
        """Like `run` for one `item`, except that items of the same `key` queued back to back
        in the scope's order (nothing else between them) run as one call of `batch`, which
        answers each item in order: its result, or the exception its caller gets. An item
        whose caller gave up before the batch started is left out; if `batch` raises, every
        caller in it gets the error."""
        ...


class ConversationStore(Protocol):
    """Conversations, messages and summaries. Every method is confined to one scope."""

    async def append_messages(
        self,
        scope: Scope,
        conversation_id: str,
        messages: Sequence[NewMessage],
        conversation_name: str,
        timeout_s: float | None,
        *,
        create: bool = True,
    ) -> AppendOutcome:
        """One transaction: create the conversation if needed (NotFound when `create` is false
        and it does not exist), store the messages. A message whose id is already stored in the
        scope with the same role and content in this conversation is returned, not stored
        again; with other content or in another conversation AlreadyExists is raised. A
        `parent_id` must name a message of this conversation (or of this batch), else NotFound.
        Either way nothing is written."""
        ...

    async def context_candidates(
        self,
        scope: Scope,
        conversation_id: str,
        before_seq: int | None,
        cost_budget: int,
        timeout_s: float | None,
    ) -> ContextCandidates:
        """The current summary and, newest first, the unsummarized messages before
        `before_seq` (all when None) whose running `context_tokens` fit `cost_budget` (at
        least the newest one). Summary and messages come from one snapshot, and the summary is
        the newest one covering only messages before `before_seq`. Since a scope's messages
        are stored one at a time in seq order (however many servers store them), the
        messages before a stored message's seq are exactly those stored before it."""
        ...

    async def unsummarized(
        self, scope: Scope, conversation_id: str, room_tokens: int, timeout_s: float | None
    ) -> tuple[Summary | None, list[StoredMessage]]:
        """The current summary and, oldest first, every message after its watermark — but no
        messages when their `context_tokens` add up to at most `room_tokens` minus the
        summary's `context_tokens` (nothing to fold). One snapshot."""
        ...

    async def user_message_before(
        self,
        scope: Scope,
        conversation_id: str,
        reply_seq: int,
        parent_id: str,
        timeout_s: float | None,
    ) -> StoredMessage | None:
        """The user message a reply answers: `parent_id` if set, else the newest user
        message stored before the reply."""
        ...

    async def save_summary(
        self,
        scope: Scope,
        conversation_id: str,
        summary: Summary,
        summarizer: str,
        timeout_s: float | None,
    ) -> bool:
        """Append a summary version if it moves the watermark forward; False otherwise."""
        ...

    async def list_conversations(
        self, scope: Scope, page: PageRequest, timeout_s: float | None
    ) -> Page[ConversationInfo]:
        """The scope's conversations, the most recently updated first."""
        ...

    async def get_conversation(
        self, scope: Scope, conversation_id: str, page: PageRequest, timeout_s: float | None
    ) -> tuple[ConversationInfo, Page[StoredMessage]]:
        """The conversation and a page of its messages, oldest first."""
        ...

    async def list_feedback(
        self, graphname: str, rated_only: bool, page: PageRequest, timeout_s: float | None
    ) -> Page[FeedbackEntry]:
        """The one read across scopes: every user's messages on one graph (the admin export)."""
        ...

    async def set_feedback(
        self,
        scope: Scope,
        message_id: str,
        feedback: Feedback,
        comment: str,
        timeout_s: float | None,
    ) -> StoredMessage: ...

    async def rename_conversation(
        self, scope: Scope, conversation_id: str, name: str, timeout_s: float | None
    ) -> ConversationInfo: ...

    async def delete_conversation(
        self, scope: Scope, conversation_id: str, timeout_s: float | None
    ) -> int:
        """Deletes the conversation, its messages and summaries; returns the message count."""
        ...
