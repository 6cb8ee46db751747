"""Typed thin clients for graphrag.memory.v1.MemoryService.

`AsyncMemoryClient` (grpc.aio) and `MemoryClient` (blocking grpc) have the same methods, one per
RPC, taking keyword arguments and returning the response protobuf. Both:

* put a deadline on every call: `timeout_s` from the constructor, or the call's own `timeout_s`.
  It is the budget of the whole call, retries and back-off included.
* retry UNAVAILABLE (and a CANCELLED the client did not cause: gRPC's answer to a call that
  reached a stopping server too late), and nothing else, with exponential back-off and jitter
  (`backoff_s`, doubled each time, capped at 5 s; each sleep is drawn in [delay/2, delay]), up to
  `retries` times, and only for calls that are safe to repeat:

  - reads always: GetContext, ListConversations, GetConversation, ListFeedback, SearchFacts,
    ListFacts, GetFact, GetFactHistory and the health check;
  - writes only when a client-chosen id makes them idempotent on the server: StartTurn and
    CompleteTurn with a `message_id`, AppendMessages when every message has a `message_id`;
  - never any other write (SubmitFeedback, RenameConversation, DeleteConversation, AddFact,
    UpdateFact, DeleteFact, ForgetScope, and the turn writes above without ids): an UNAVAILABLE
    can mean the server did the work and the answer was lost.

* send `authorization: Bearer <token>` metadata on every call when `token` is set (over a
  plaintext channel too; use TLS wherever the token matters);
* raise `MemoryClientError` (or its subclass for the code) for every failed RPC.
"""

from __future__ import annotations

from collections.abc import Sequence

from memory_client._config import DEFAULT_OPTIONS
from memory_client._fact_rpcs import FactRpcs
from memory_client._health import HealthCheckRequest, HealthCheckResponse, serving
from memory_client._retry import all_have_message_ids, always, has_message_id, never
from memory_client._rpc import rpc
from memory_client._transport import AsyncTransport, SyncTransport
from memory_client.v1 import memory_pb2 as pb

__all__ = ["DEFAULT_OPTIONS", "SERVICE_NAME", "AsyncMemoryClient", "MemoryClient"]

SERVICE_NAME = "graphrag.memory.v1.MemoryService"


class _Rpcs(FactRpcs):
    """The RPC table: one entry per RPC, its request builder under `@rpc` with the RPC's name,
    response type and retry rule. Both clients take their methods from here (memory_client._rpc
    says how), so adding an RPC is adding one entry."""

    # --- Turns -----------------------------------------------------------------------------

    @rpc("StartTurn", pb.StartTurnResponse, retry_if=has_message_id)
    def start_turn(
        self,
        username: str,
        graphname: str,
        conversation_id: str,
        content: str,
        *,
        message_id: str = "",
        conversation_name: str = "",
        timeout_s: float | None = None,
    ) -> pb.StartTurnRequest:
        """Retried on UNAVAILABLE only when `message_id` is set."""
        return pb.StartTurnRequest(
            username=username,
            graphname=graphname,
            conversation_id=conversation_id,
            content=content,
            message_id=message_id,
            conversation_name=conversation_name,
        )

    @rpc("CompleteTurn", pb.CompleteTurnResponse, retry_if=has_message_id)
    def complete_turn(
        self,
        username: str,
        graphname: str,
        conversation_id: str,
        content: str,
        *,
        model: str = "",
        parent_id: str = "",
        response_time_seconds: float = 0.0,
        message_id: str = "",
        timeout_s: float | None = None,
    ) -> pb.CompleteTurnRequest:
        """Retried on UNAVAILABLE only when `message_id` is set."""
        return pb.CompleteTurnRequest(
            username=username,
            graphname=graphname,
            conversation_id=conversation_id,
            content=content,
            model=model,
            parent_id=parent_id,
            response_time_seconds=response_time_seconds,
            message_id=message_id,
        )

    @rpc("GetContext", pb.GetContextResponse, retry_if=always)
    def get_context(
        self,
        username: str,
        graphname: str,
        conversation_id: str,
        *,
        question: str = "",
        timeout_s: float | None = None,
    ) -> pb.GetContextRequest:
        return pb.GetContextRequest(
            username=username,
            graphname=graphname,
            conversation_id=conversation_id,
            question=question,
        )

    @rpc("AppendMessages", pb.AppendMessagesResponse, retry_if=all_have_message_ids)
    def append_messages(
        self,
        username: str,
        graphname: str,
        conversation_id: str,
        messages: Sequence[pb.NewMessage],
        *,
        conversation_name: str = "",
        timeout_s: float | None = None,
    ) -> pb.AppendMessagesRequest:
        """Retried on UNAVAILABLE only when every message carries a `message_id`."""
        return pb.AppendMessagesRequest(
            username=username,
            graphname=graphname,
            conversation_id=conversation_id,
            messages=messages,
            conversation_name=conversation_name,
        )

    # --- Conversations ---------------------------------------------------------------------

    @rpc("ListConversations", pb.ListConversationsResponse, retry_if=always)
    def list_conversations(
        self,
        username: str,
        graphname: str,
        *,
        page_size: int = 0,
        page_token: str = "",
        timeout_s: float | None = None,
    ) -> pb.ListConversationsRequest:
        return pb.ListConversationsRequest(
            username=username, graphname=graphname, page_size=page_size, page_token=page_token
        )

    @rpc("ListFeedback", pb.ListFeedbackResponse, retry_if=always)
    def list_feedback(
        self,
        graphname: str,
        *,
        rated_only: bool = False,
        page_size: int = 0,
        page_token: str = "",
        timeout_s: float | None = None,
    ) -> pb.ListFeedbackRequest:
        """Every user's messages on the graph, oldest first (the admin feedback export)."""
        return pb.ListFeedbackRequest(
            graphname=graphname, rated_only=rated_only, page_size=page_size, page_token=page_token
        )

    @rpc("GetConversation", pb.GetConversationResponse, retry_if=always)
    def get_conversation(
        self,
        username: str,
        graphname: str,
        conversation_id: str,
        *,
        page_size: int = 0,
        page_token: str = "",
        timeout_s: float | None = None,
    ) -> pb.GetConversationRequest:
        return pb.GetConversationRequest(
            username=username,
            graphname=graphname,
            conversation_id=conversation_id,
            page_size=page_size,
            page_token=page_token,
        )

    @rpc("SubmitFeedback", pb.SubmitFeedbackResponse, retry_if=never)
    def submit_feedback(
        self,
        username: str,
        graphname: str,
        message_id: str,
        feedback: pb.Feedback.ValueType,
        *,
        comment: str = "",
        timeout_s: float | None = None,
    ) -> pb.SubmitFeedbackRequest:
        return pb.SubmitFeedbackRequest(
            username=username,
            graphname=graphname,
            message_id=message_id,
            feedback=feedback,
            comment=comment,
        )

    @rpc("RenameConversation", pb.RenameConversationResponse, retry_if=never)
    def rename_conversation(
        self,
        username: str,
        graphname: str,
        conversation_id: str,
        name: str,
        *,
        timeout_s: float | None = None,
    ) -> pb.RenameConversationRequest:
        return pb.RenameConversationRequest(
            username=username, graphname=graphname, conversation_id=conversation_id, name=name
        )

    @rpc("DeleteConversation", pb.DeleteConversationResponse, retry_if=never)
    def delete_conversation(
        self,
        username: str,
        graphname: str,
        conversation_id: str,
        *,
        timeout_s: float | None = None,
    ) -> pb.DeleteConversationRequest:
        return pb.DeleteConversationRequest(
            username=username, graphname=graphname, conversation_id=conversation_id
        )

    # --- Health ----------------------------------------------------------------------------

    @rpc("Check", HealthCheckResponse, retry_if=always, service="health").returning(serving)
    def health(
        self, service: str = SERVICE_NAME, *, timeout_s: float | None = None
    ) -> HealthCheckRequest:
        """True when the server reports `service` SERVING ("" asks about the whole server)."""
        return HealthCheckRequest(service=service)


class AsyncMemoryClient(_Rpcs, AsyncTransport):
    """grpc.aio client; see the module docstring for deadlines, retries, TLS and tokens.

    Use `async with AsyncMemoryClient(...) as client:` or call `await client.close()`."""


class MemoryClient(_Rpcs, SyncTransport):
    """Blocking client over the synchronous gRPC channel: the same methods, deadlines, retries,
    metadata and errors as AsyncMemoryClient.

    Do not call it from a thread running the event loop of an in-process server: it blocks."""
