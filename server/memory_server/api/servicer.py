"""The gRPC edge: per RPC, which fields it reads, which domain call it makes, and the response it
builds. The shared shape (scope, budget, error mapping) is api.call; translations are
api.convert; field rules are api.validation; the long-term RPCs are api.long_term_rpcs. No SQL,
no rules."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from memory_client.v1 import memory_pb2 as pb
from memory_client.v1 import memory_pb2_grpc as pb_grpc
from memory_server.api import convert as c
from memory_server.api import validation as v
from memory_server.api.call import (
    NO_MEMORY,
    Call,
    GraphCall,
    enabled,
    graph_rpc,
    rpc,
    time_field,
)
from memory_server.api.imported import new_messages
from memory_server.api.long_term_rpcs import LongTermRpcs
from memory_server.extraction.secrets import DetectSecretsFilter
from memory_server.memory.conversation.history import ConversationHistory
from memory_server.memory.conversation.model import ReplyFields
from memory_server.memory.facts.admin import FactAdmin
from memory_server.memory.ports import SecretFilter
from memory_server.memory.recall.episodes import EpisodeRecall
from memory_server.memory.recall.search import Recall
from memory_server.memory.turn.turns import Turns
from memory_server.settings import Settings

LIST_CONVERSATIONS_PAGE = (50, 500)  # (default, maximum)
GET_CONVERSATION_PAGE = (100, 1000)
LIST_FEEDBACK_PAGE = (100, 1000)


class MemoryServicer(LongTermRpcs, pb_grpc.MemoryServiceServicer):
    def __init__(
        self,
        settings: Settings,
        memory: Turns | None,
        history: ConversationHistory | None = None,
        recall: Recall | None = None,
        facts: FactAdmin | None = None,
        secrets: SecretFilter | None = None,
        episodes: EpisodeRecall | None = None,
    ) -> None:
        """`memory` is None when memory is disabled: every RPC then answers
        FAILED_PRECONDITION while health keeps serving. `secrets` refuses fact texts that hold
        a secret (api.secret_fields), whatever `redact_secrets` says."""
        self._settings = settings
        # A page of messages fills half the largest response: room for the rest and framing.
        self._page_bytes = settings.max_request_bytes // 2
        self._secrets = secrets if secrets is not None else DetectSecretsFilter()
        self._enabled_memory = memory
        self._enabled_history = history
        self._enabled_recall = recall
        self._enabled_facts = facts
        self._enabled_episodes = episodes

    @property
    def _history(self) -> ConversationHistory:
        return enabled(self._enabled_history, NO_MEMORY)

    @property
    def _memory(self) -> Turns:
        return enabled(self._enabled_memory, NO_MEMORY)

    # --- conversations ---------------------------------------------------------------------

    @rpc
    async def StartTurn(self, call: Call[pb.StartTurnRequest]) -> pb.StartTurnResponse:
        conversation_id = call.id("conversation_id")
        turn = await self._memory.start_turn(
            call.scope,
            conversation_id,
            call.content("content"),
            message_id=call.id("message_id", required=False),
            conversation_name=await self._name(call, "conversation_name"),
            created_at=time_field("created_at", call.request, "created_at"),
            timeout_s=call.budget_s,
        )
        return pb.StartTurnResponse(
            message=c.message_pb(turn.message),
            context=c.context_pb(turn.context),
            conversation_created=turn.conversation_created,
        )

    @rpc
    async def CompleteTurn(self, call: Call[pb.CompleteTurnRequest]) -> pb.CompleteTurnResponse:
        conversation_id = call.id("conversation_id")
        reply = ReplyFields(
            model=call.text("model", v.MAX_ID_CHARS),
            parent_id=call.id("parent_id", required=False),
            response_time_seconds=v.duration_seconds(
                "response_time_seconds", call.request.response_time_seconds
            ),
        )
        done = await self._memory.complete_turn(
            call.scope,
            conversation_id,
            call.content("content"),
            reply,
            message_id=call.id("message_id", required=False),
            created_at=time_field("created_at", call.request, "created_at"),
            timeout_s=call.budget_s,
        )
        return pb.CompleteTurnResponse(
            message=c.message_pb(done.message), compacted_inline=done.compacted_inline
        )

    @rpc
    async def GetContext(self, call: Call[pb.GetContextRequest]) -> pb.GetContextResponse:
        conversation_id = call.id("conversation_id")
        memory_context, exists = await self._memory.get_context(
            call.scope,
            conversation_id,
            call.content("question", required=False),
            timeout_s=call.budget_s,
        )
        return pb.GetContextResponse(
            context=c.context_pb(memory_context), conversation_exists=exists
        )

    @rpc
    async def AppendMessages(
        self, call: Call[pb.AppendMessagesRequest]
    ) -> pb.AppendMessagesResponse:
        conversation_id = call.id("conversation_id")
        # A message's comment is stored redacted like a feedback comment.
        given = await new_messages(
            call.request.messages,
            max_messages=self._settings.max_messages_per_append,
            max_message_bytes=self._settings.max_message_bytes,
        )
        messages = [
            replace(m, comment=await self._memory.redact(m.comment, "in a message comment"))
            for m in given
        ]
        outcome = await self._memory.append_messages(
            call.scope,
            conversation_id,
            messages,
            conversation_name=await self._name(call, "conversation_name"),
            timeout_s=call.budget_s,
        )
        return pb.AppendMessagesResponse(
            message_ids=[m.message_id for m in outcome.messages],
            inserted=outcome.inserted,
            skipped=len(outcome.messages) - outcome.inserted,
            conversation_created=outcome.conversation_created,
        )

    @rpc
    async def ListConversations(
        self, call: Call[pb.ListConversationsRequest]
    ) -> pb.ListConversationsResponse:
        page = await self._history.list_conversations(
            call.scope, call.page(LIST_CONVERSATIONS_PAGE), timeout_s=call.budget_s
        )
        return pb.ListConversationsResponse(
            conversations=[c.conversation_pb(info) for info in page.items],
            next_page_token=page.next_cursor,
        )

    @rpc
    async def GetConversation(
        self, call: Call[pb.GetConversationRequest]
    ) -> pb.GetConversationResponse:
        info, page = await self._history.get_conversation(
            call.scope,
            call.id("conversation_id"),
            call.page(GET_CONVERSATION_PAGE, self._page_bytes),
            timeout_s=call.budget_s,
        )
        return pb.GetConversationResponse(
            conversation=c.conversation_pb(info),
            messages=[c.message_pb(m) for m in page.items],
            next_page_token=page.next_cursor,
        )

    @rpc
    async def SubmitFeedback(
        self, call: Call[pb.SubmitFeedbackRequest]
    ) -> pb.SubmitFeedbackResponse:
        message = await self._history.submit_feedback(
            call.scope,
            call.id("message_id"),
            c.feedback("feedback", call.request.feedback),
            await self._memory.redact(
                call.text("comment", v.MAX_COMMENT_BYTES), "in a feedback comment"
            ),
            timeout_s=call.budget_s,
        )
        return pb.SubmitFeedbackResponse(message=c.message_pb(message))

    @rpc
    async def RenameConversation(
        self, call: Call[pb.RenameConversationRequest]
    ) -> pb.RenameConversationResponse:
        info = await self._history.rename_conversation(
            call.scope,
            call.id("conversation_id"),
            await self._name(call, "name"),
            timeout_s=call.budget_s,
        )
        return pb.RenameConversationResponse(conversation=c.conversation_pb(info))

    async def _name(self, call: Call[Any], field: str) -> str:
        """A conversation name as stored: redacted like a message (shown in every UI list)."""
        return await self._memory.redact(
            call.text(field, v.MAX_NAME_CHARS), "in a conversation name"
        )

    @rpc
    async def DeleteConversation(
        self, call: Call[pb.DeleteConversationRequest]
    ) -> pb.DeleteConversationResponse:
        deleted = await self._history.delete_conversation(
            call.scope, call.id("conversation_id"), timeout_s=call.budget_s
        )
        return pb.DeleteConversationResponse(deleted_messages=deleted)

    # --- long-term memory ------------------------------------------------------------------

    @graph_rpc
    async def ListFeedback(
        self, call: GraphCall[pb.ListFeedbackRequest]
    ) -> pb.ListFeedbackResponse:
        page = await self._history.list_feedback(
            call.graphname,
            call.request.rated_only,
            call.page(LIST_FEEDBACK_PAGE, self._page_bytes),
            timeout_s=call.budget_s,
        )
        return pb.ListFeedbackResponse(
            entries=[c.feedback_entry_pb(entry) for entry in page.items],
            next_page_token=page.next_cursor,
        )
