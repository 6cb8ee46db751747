"""The conversation history the UI shows: conversations newest first, a conversation's
messages in order, feedback and its admin export, renaming and deleting a conversation.

Reads go straight to the store; writes go through the scope's actor, in the order accepted,
beside the turns of the same scope.
"""

from __future__ import annotations

from dataclasses import dataclass

from memory_server.memory.conversation.model import (
    ConversationInfo,
    Feedback,
    FeedbackEntry,
    Page,
    PageRequest,
    StoredMessage,
)
from memory_server.memory.identity import Scope
from memory_server.memory.ports import ConversationStore, ScopeExecutor


@dataclass(frozen=True, kw_only=True, eq=False)
class ConversationHistory:
    store: ConversationStore
    executor: ScopeExecutor

    async def list_conversations(
        self, scope: Scope, page: PageRequest, timeout_s: float | None = None
    ) -> Page[ConversationInfo]:
        return await self.store.list_conversations(scope, page, timeout_s)

    async def get_conversation(
        self, scope: Scope, conversation_id: str, page: PageRequest, timeout_s: float | None = None
    ) -> tuple[ConversationInfo, Page[StoredMessage]]:
        return await self.store.get_conversation(scope, conversation_id, page, timeout_s)

    async def list_feedback(
        self, graphname: str, rated_only: bool, page: PageRequest, timeout_s: float | None = None
    ) -> Page[FeedbackEntry]:
        return await self.store.list_feedback(graphname, rated_only, page, timeout_s)

    # --- UI writes -------------------------------------------------------------------------

    async def submit_feedback(
        self,
        scope: Scope,
        message_id: str,
        feedback: Feedback,
        comment: str,
        timeout_s: float | None = None,
    ) -> StoredMessage:
        return await self.executor.run(
            scope,
            lambda: self.store.set_feedback(scope, message_id, feedback, comment, timeout_s),
        )

    async def rename_conversation(
        self, scope: Scope, conversation_id: str, name: str, timeout_s: float | None = None
    ) -> ConversationInfo:
        return await self.executor.run(
            scope,
            lambda: self.store.rename_conversation(scope, conversation_id, name, timeout_s),
        )

    async def delete_conversation(
        self, scope: Scope, conversation_id: str, timeout_s: float | None = None
    ) -> int:
        return await self.executor.run(
            scope, lambda: self.store.delete_conversation(scope, conversation_id, timeout_s)
        )
