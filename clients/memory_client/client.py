"""Typed thin clients for graphrag.memory.v1.MemoryService.

`AsyncMemoryClient` (grpc.aio) and `MemoryClient` (blocking grpc) have the same methods, one per
RPC, taking keyword arguments and returning the response protobuf. Both:

* put a deadline on every call: `timeout_s` from the constructor, or the call's own `timeout_s`.
  It is the budget of the whole call, retries and back-off included.
* retry UNAVAILABLE, and only UNAVAILABLE, with exponential back-off and jitter
  (`backoff_s`, doubled each time, capped at 5 s; each sleep is drawn in [delay/2, delay]), up to
  `retries` times, and only for calls that are safe to repeat:

  - reads always: GetContext, ListConversations, GetConversation, SearchFacts, ListFacts,
    GetFact, GetFactHistory and the health check;
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

import asyncio
import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import Any, Generic, Literal, TypeVar

import grpc
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp
from grpc_health.v1 import health_pb2, health_pb2_grpc

from memory_client.errors import error_for
from memory_client.v1 import memory_pb2 as pb
from memory_client.v1 import memory_pb2_grpc as pb_grpc

__all__ = ["DEFAULT_OPTIONS", "SERVICE_NAME", "AsyncMemoryClient", "MemoryClient"]

log = logging.getLogger(__name__)

SERVICE_NAME = "graphrag.memory.v1.MemoryService"
_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
_MAX_BACKOFF_S = 5.0

DEFAULT_OPTIONS: tuple[tuple[str, Any], ...] = (
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.max_send_message_length", _MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", _MAX_MESSAGE_BYTES),
    # gRPC waits 1 s (growing to 120 s) before reconnecting after a refused connection, and fails
    # every call fast meanwhile; shorter waits give the UNAVAILABLE retries something to reach.
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 5_000),
)

R = TypeVar("R")


def _always(request: Any) -> bool:
    return True


def _never(request: Any) -> bool:
    return False


def _has_message_id(request: Any) -> bool:
    return bool(request.message_id)


def _all_have_message_ids(request: Any) -> bool:
    return bool(request.messages) and all(m.message_id for m in request.messages)


@dataclass(frozen=True)
class _Rpc(Generic[R]):
    """One RPC: its name (the stub attribute), the service it is on, the response type (for the
    type checker) and whether a given request may be retried."""

    name: str
    response: type[R]
    idempotent: Callable[[Any], bool]
    service: Literal["memory", "health"] = "memory"


_START_TURN = _Rpc("StartTurn", pb.StartTurnResponse, _has_message_id)
_COMPLETE_TURN = _Rpc("CompleteTurn", pb.CompleteTurnResponse, _has_message_id)
_GET_CONTEXT = _Rpc("GetContext", pb.GetContextResponse, _always)
_APPEND_MESSAGES = _Rpc("AppendMessages", pb.AppendMessagesResponse, _all_have_message_ids)
_LIST_CONVERSATIONS = _Rpc("ListConversations", pb.ListConversationsResponse, _always)
_GET_CONVERSATION = _Rpc("GetConversation", pb.GetConversationResponse, _always)
_SUBMIT_FEEDBACK = _Rpc("SubmitFeedback", pb.SubmitFeedbackResponse, _never)
_RENAME_CONVERSATION = _Rpc("RenameConversation", pb.RenameConversationResponse, _never)
_DELETE_CONVERSATION = _Rpc("DeleteConversation", pb.DeleteConversationResponse, _never)
_SEARCH_FACTS = _Rpc("SearchFacts", pb.SearchFactsResponse, _always)
_LIST_FACTS = _Rpc("ListFacts", pb.ListFactsResponse, _always)
_GET_FACT = _Rpc("GetFact", pb.GetFactResponse, _always)
_GET_FACT_HISTORY = _Rpc("GetFactHistory", pb.GetFactHistoryResponse, _always)
_ADD_FACT = _Rpc("AddFact", pb.AddFactResponse, _never)
_UPDATE_FACT = _Rpc("UpdateFact", pb.UpdateFactResponse, _never)
_DELETE_FACT = _Rpc("DeleteFact", pb.DeleteFactResponse, _never)
_FORGET_SCOPE = _Rpc("ForgetScope", pb.ForgetScopeResponse, _never)
_HEALTH_CHECK: _Rpc[Any] = _Rpc("Check", health_pb2.HealthCheckResponse, _always, service="health")


def _timestamp(value: datetime | None) -> Timestamp | None:
    if value is None:
        return None
    if value.tzinfo is None:
        raise ValueError("as-of times must be timezone-aware datetimes")
    stamp = Timestamp()
    stamp.FromDatetime(value)
    return stamp


def _search_facts_request(
    username: str,
    graphname: str,
    query: str,
    top_k: int,
    threshold: float | None,
    as_of_valid_time: datetime | None,
    as_of_transaction_time: datetime | None,
) -> pb.SearchFactsRequest:
    request = pb.SearchFactsRequest(
        username=username,
        graphname=graphname,
        query=query,
        top_k=top_k,
        as_of_valid_time=_timestamp(as_of_valid_time),
        as_of_transaction_time=_timestamp(as_of_transaction_time),
    )
    if threshold is not None:
        request.threshold = threshold
    return request


class _Attempts:
    """The retry plan of one call: the overall deadline and the back-off between attempts."""

    def __init__(self, rpc: _Rpc[Any], request: Message, timeout_s: float, config: _Config):
        self._deadline = time.monotonic() + timeout_s
        self._retryable = rpc.idempotent(request)
        self._config = config
        self._rpc = rpc
        self.retries = 0

    def timeout(self) -> float:
        """Time left for the next attempt (never zero: gRPC would treat it as no deadline)."""
        return max(self._deadline - time.monotonic(), 0.001)

    def delay_before_retry(self, code: grpc.StatusCode) -> float | None:
        """Seconds to sleep before the next attempt, or None when the error is final."""
        if code != grpc.StatusCode.UNAVAILABLE or not self._retryable:
            return None
        if self.retries >= self._config.retries:
            return None
        base = min(self._config.backoff_s * (2**self.retries), _MAX_BACKOFF_S)
        delay = random.uniform(base / 2, base)
        if time.monotonic() + delay >= self._deadline:
            return None
        self.retries += 1
        log.debug(
            "%s: UNAVAILABLE; retry %d/%d in %.3fs",
            self._rpc.name,
            self.retries,
            self._config.retries,
            delay,
        )
        return delay


@dataclass(frozen=True)
class _Config:
    target: str
    timeout_s: float
    retries: int
    backoff_s: float
    credentials: Any  # grpc.ChannelCredentials | None
    metadata: tuple[tuple[str, str], ...]
    options: tuple[tuple[str, Any], ...]


def _config(
    target: str,
    timeout_s: float,
    retries: int,
    backoff_s: float,
    tls: bool | grpc.ChannelCredentials,
    root_certificates: bytes | None,
    token: str | None,
    options: Sequence[tuple[str, Any]],
) -> _Config:
    if timeout_s <= 0:
        raise ValueError("timeout_s must be positive")
    if retries < 0 or backoff_s < 0:
        raise ValueError("retries and backoff_s must not be negative")
    credentials: Any = None
    if isinstance(tls, grpc.ChannelCredentials):
        credentials = tls
    elif tls:
        credentials = grpc.ssl_channel_credentials(root_certificates=root_certificates)
    elif root_certificates is not None:
        raise ValueError("root_certificates needs tls=True")
    metadata = (("authorization", f"Bearer {token}"),) if token else ()
    merged = dict(DEFAULT_OPTIONS)
    merged.update(dict(options))
    return _Config(
        target, timeout_s, retries, backoff_s, credentials, metadata, tuple(merged.items())
    )


class AsyncMemoryClient:
    """grpc.aio client; see the module docstring for deadlines, retries, TLS and tokens.

    Use `async with AsyncMemoryClient(...) as client:` or call `await client.close()`."""

    def __init__(
        self,
        target: str,
        *,
        timeout_s: float = 10.0,
        retries: int = 3,
        backoff_s: float = 0.1,
        tls: bool | grpc.ChannelCredentials = False,
        root_certificates: bytes | None = None,
        token: str | None = None,
        options: Sequence[tuple[str, Any]] = (),
    ) -> None:
        self._config = _config(
            target, timeout_s, retries, backoff_s, tls, root_certificates, token, options
        )
        if self._config.credentials is None:
            self._channel = grpc.aio.insecure_channel(target, options=self._config.options)
        else:
            self._channel = grpc.aio.secure_channel(
                target, self._config.credentials, options=self._config.options
            )
        self._stubs: dict[str, Any] = {
            "memory": pb_grpc.MemoryServiceStub(self._channel),
            "health": health_pb2_grpc.HealthStub(self._channel),
        }

    async def __aenter__(self) -> AsyncMemoryClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        await self._channel.close()

    async def _call(self, rpc: _Rpc[R], request: Message, timeout_s: float | None) -> R:
        method = getattr(self._stubs[rpc.service], rpc.name)
        attempts = _Attempts(rpc, request, timeout_s or self._config.timeout_s, self._config)
        while True:
            try:
                response: R = await method(
                    request, timeout=attempts.timeout(), metadata=self._config.metadata
                )
                return response
            except grpc.aio.AioRpcError as exc:
                delay = attempts.delay_before_retry(exc.code())
                if delay is None:
                    raise error_for(exc.code(), exc.details() or "", rpc.name) from exc
            await asyncio.sleep(delay)

    # --- Turns -----------------------------------------------------------------------------

    async def start_turn(
        self,
        username: str,
        graphname: str,
        conversation_id: str,
        content: str,
        *,
        message_id: str = "",
        conversation_name: str = "",
        timeout_s: float | None = None,
    ) -> pb.StartTurnResponse:
        """Retried on UNAVAILABLE only when `message_id` is set."""
        request = pb.StartTurnRequest(
            username=username,
            graphname=graphname,
            conversation_id=conversation_id,
            content=content,
            message_id=message_id,
            conversation_name=conversation_name,
        )
        return await self._call(_START_TURN, request, timeout_s)

    async def complete_turn(
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
    ) -> pb.CompleteTurnResponse:
        """Retried on UNAVAILABLE only when `message_id` is set."""
        request = pb.CompleteTurnRequest(
            username=username,
            graphname=graphname,
            conversation_id=conversation_id,
            content=content,
            model=model,
            parent_id=parent_id,
            response_time_seconds=response_time_seconds,
            message_id=message_id,
        )
        return await self._call(_COMPLETE_TURN, request, timeout_s)

    async def get_context(
        self,
        username: str,
        graphname: str,
        conversation_id: str,
        *,
        question: str = "",
        timeout_s: float | None = None,
    ) -> pb.GetContextResponse:
        request = pb.GetContextRequest(
            username=username,
            graphname=graphname,
            conversation_id=conversation_id,
            question=question,
        )
        return await self._call(_GET_CONTEXT, request, timeout_s)

    async def append_messages(
        self,
        username: str,
        graphname: str,
        conversation_id: str,
        messages: Sequence[pb.NewMessage],
        *,
        conversation_name: str = "",
        timeout_s: float | None = None,
    ) -> pb.AppendMessagesResponse:
        """Retried on UNAVAILABLE only when every message carries a `message_id`."""
        request = pb.AppendMessagesRequest(
            username=username,
            graphname=graphname,
            conversation_id=conversation_id,
            messages=messages,
            conversation_name=conversation_name,
        )
        return await self._call(_APPEND_MESSAGES, request, timeout_s)

    # --- Conversations ---------------------------------------------------------------------

    async def list_conversations(
        self,
        username: str,
        graphname: str,
        *,
        page_size: int = 0,
        page_token: str = "",
        timeout_s: float | None = None,
    ) -> pb.ListConversationsResponse:
        request = pb.ListConversationsRequest(
            username=username, graphname=graphname, page_size=page_size, page_token=page_token
        )
        return await self._call(_LIST_CONVERSATIONS, request, timeout_s)

    async def get_conversation(
        self,
        username: str,
        graphname: str,
        conversation_id: str,
        *,
        page_size: int = 0,
        page_token: str = "",
        timeout_s: float | None = None,
    ) -> pb.GetConversationResponse:
        request = pb.GetConversationRequest(
            username=username,
            graphname=graphname,
            conversation_id=conversation_id,
            page_size=page_size,
            page_token=page_token,
        )
        return await self._call(_GET_CONVERSATION, request, timeout_s)

    async def submit_feedback(
        self,
        username: str,
        graphname: str,
        message_id: str,
        feedback: pb.Feedback.ValueType,
        *,
        comment: str = "",
        timeout_s: float | None = None,
    ) -> pb.SubmitFeedbackResponse:
        request = pb.SubmitFeedbackRequest(
            username=username,
            graphname=graphname,
            message_id=message_id,
            feedback=feedback,
            comment=comment,
        )
        return await self._call(_SUBMIT_FEEDBACK, request, timeout_s)

    async def rename_conversation(
        self,
        username: str,
        graphname: str,
        conversation_id: str,
        name: str,
        *,
        timeout_s: float | None = None,
    ) -> pb.RenameConversationResponse:
        request = pb.RenameConversationRequest(
            username=username, graphname=graphname, conversation_id=conversation_id, name=name
        )
        return await self._call(_RENAME_CONVERSATION, request, timeout_s)

    async def delete_conversation(
        self,
        username: str,
        graphname: str,
        conversation_id: str,
        *,
        timeout_s: float | None = None,
    ) -> pb.DeleteConversationResponse:
        request = pb.DeleteConversationRequest(
            username=username, graphname=graphname, conversation_id=conversation_id
        )
        return await self._call(_DELETE_CONVERSATION, request, timeout_s)

    # --- Long-term memory ------------------------------------------------------------------

    async def search_facts(
        self,
        username: str,
        graphname: str,
        query: str,
        *,
        top_k: int = 0,
        threshold: float | None = None,
        as_of_valid_time: datetime | None = None,
        as_of_transaction_time: datetime | None = None,
        timeout_s: float | None = None,
    ) -> pb.SearchFactsResponse:
        """`threshold` None means the server's default; as-of times must be timezone-aware."""
        request = _search_facts_request(
            username,
            graphname,
            query,
            top_k,
            threshold,
            as_of_valid_time,
            as_of_transaction_time,
        )
        return await self._call(_SEARCH_FACTS, request, timeout_s)

    async def list_facts(
        self,
        username: str,
        graphname: str,
        *,
        page_size: int = 0,
        page_token: str = "",
        as_of_valid_time: datetime | None = None,
        as_of_transaction_time: datetime | None = None,
        timeout_s: float | None = None,
    ) -> pb.ListFactsResponse:
        request = pb.ListFactsRequest(
            username=username,
            graphname=graphname,
            page_size=page_size,
            page_token=page_token,
            as_of_valid_time=_timestamp(as_of_valid_time),
            as_of_transaction_time=_timestamp(as_of_transaction_time),
        )
        return await self._call(_LIST_FACTS, request, timeout_s)

    async def get_fact(
        self, username: str, graphname: str, fact_id: str, *, timeout_s: float | None = None
    ) -> pb.GetFactResponse:
        request = pb.GetFactRequest(username=username, graphname=graphname, fact_id=fact_id)
        return await self._call(_GET_FACT, request, timeout_s)

    async def get_fact_history(
        self, username: str, graphname: str, fact_id: str, *, timeout_s: float | None = None
    ) -> pb.GetFactHistoryResponse:
        request = pb.GetFactHistoryRequest(username=username, graphname=graphname, fact_id=fact_id)
        return await self._call(_GET_FACT_HISTORY, request, timeout_s)

    async def add_fact(
        self,
        username: str,
        graphname: str,
        text: str,
        *,
        kind: str = "",
        timeout_s: float | None = None,
    ) -> pb.AddFactResponse:
        request = pb.AddFactRequest(username=username, graphname=graphname, text=text, kind=kind)
        return await self._call(_ADD_FACT, request, timeout_s)

    async def update_fact(
        self,
        username: str,
        graphname: str,
        fact_id: str,
        text: str,
        *,
        kind: str = "",
        timeout_s: float | None = None,
    ) -> pb.UpdateFactResponse:
        request = pb.UpdateFactRequest(
            username=username, graphname=graphname, fact_id=fact_id, text=text, kind=kind
        )
        return await self._call(_UPDATE_FACT, request, timeout_s)

    async def delete_fact(
        self,
        username: str,
        graphname: str,
        fact_id: str,
        *,
        ended: bool = False,
        timeout_s: float | None = None,
    ) -> pb.DeleteFactResponse:
        request = pb.DeleteFactRequest(
            username=username, graphname=graphname, fact_id=fact_id, ended=ended
        )
        return await self._call(_DELETE_FACT, request, timeout_s)

    async def forget_scope(
        self,
        username: str,
        graphname: str,
        *,
        include_conversations: bool = False,
        timeout_s: float | None = None,
    ) -> pb.ForgetScopeResponse:
        request = pb.ForgetScopeRequest(
            username=username, graphname=graphname, include_conversations=include_conversations
        )
        return await self._call(_FORGET_SCOPE, request, timeout_s)

    # --- Health ----------------------------------------------------------------------------

    async def health(self, service: str = SERVICE_NAME, *, timeout_s: float | None = None) -> bool:
        """True when the server reports `service` SERVING ("" asks about the whole server)."""
        request = health_pb2.HealthCheckRequest(service=service)
        response = await self._call(_HEALTH_CHECK, request, timeout_s)
        return bool(response.status == health_pb2.HealthCheckResponse.SERVING)


class MemoryClient:
    """Blocking client over the synchronous gRPC channel: the same methods, deadlines, retries,
    metadata and errors as AsyncMemoryClient.

    Do not call it from a thread running the event loop of an in-process server: it blocks."""

    def __init__(
        self,
        target: str,
        *,
        timeout_s: float = 10.0,
        retries: int = 3,
        backoff_s: float = 0.1,
        tls: bool | grpc.ChannelCredentials = False,
        root_certificates: bytes | None = None,
        token: str | None = None,
        options: Sequence[tuple[str, Any]] = (),
    ) -> None:
        self._config = _config(
            target, timeout_s, retries, backoff_s, tls, root_certificates, token, options
        )
        if self._config.credentials is None:
            self._channel = grpc.insecure_channel(target, options=self._config.options)
        else:
            self._channel = grpc.secure_channel(
                target, self._config.credentials, options=self._config.options
            )
        self._stubs: dict[str, Any] = {
            "memory": pb_grpc.MemoryServiceStub(self._channel),
            "health": health_pb2_grpc.HealthStub(self._channel),
        }

    def __enter__(self) -> MemoryClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._channel.close()

    def _call(self, rpc: _Rpc[R], request: Message, timeout_s: float | None) -> R:
        method = getattr(self._stubs[rpc.service], rpc.name)
        attempts = _Attempts(rpc, request, timeout_s or self._config.timeout_s, self._config)
        while True:
            try:
                response: R = method(
                    request, timeout=attempts.timeout(), metadata=self._config.metadata
                )
                return response
            except grpc.RpcError as exc:
                code = exc.code()
                delay = attempts.delay_before_retry(code)
                if delay is None:
                    raise error_for(code, exc.details() or "", rpc.name) from exc
            time.sleep(delay)

    # --- Turns -----------------------------------------------------------------------------

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
    ) -> pb.StartTurnResponse:
        """Retried on UNAVAILABLE only when `message_id` is set."""
        request = pb.StartTurnRequest(
            username=username,
            graphname=graphname,
            conversation_id=conversation_id,
            content=content,
            message_id=message_id,
            conversation_name=conversation_name,
        )
        return self._call(_START_TURN, request, timeout_s)

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
    ) -> pb.CompleteTurnResponse:
        """Retried on UNAVAILABLE only when `message_id` is set."""
        request = pb.CompleteTurnRequest(
            username=username,
            graphname=graphname,
            conversation_id=conversation_id,
            content=content,
            model=model,
            parent_id=parent_id,
            response_time_seconds=response_time_seconds,
            message_id=message_id,
        )
        return self._call(_COMPLETE_TURN, request, timeout_s)

    def get_context(
        self,
        username: str,
        graphname: str,
        conversation_id: str,
        *,
        question: str = "",
        timeout_s: float | None = None,
    ) -> pb.GetContextResponse:
        request = pb.GetContextRequest(
            username=username,
            graphname=graphname,
            conversation_id=conversation_id,
            question=question,
        )
        return self._call(_GET_CONTEXT, request, timeout_s)

    def append_messages(
        self,
        username: str,
        graphname: str,
        conversation_id: str,
        messages: Sequence[pb.NewMessage],
        *,
        conversation_name: str = "",
        timeout_s: float | None = None,
    ) -> pb.AppendMessagesResponse:
        """Retried on UNAVAILABLE only when every message carries a `message_id`."""
        request = pb.AppendMessagesRequest(
            username=username,
            graphname=graphname,
            conversation_id=conversation_id,
            messages=messages,
            conversation_name=conversation_name,
        )
        return self._call(_APPEND_MESSAGES, request, timeout_s)

    # --- Conversations ---------------------------------------------------------------------

    def list_conversations(
        self,
        username: str,
        graphname: str,
        *,
        page_size: int = 0,
        page_token: str = "",
        timeout_s: float | None = None,
    ) -> pb.ListConversationsResponse:
        request = pb.ListConversationsRequest(
            username=username, graphname=graphname, page_size=page_size, page_token=page_token
        )
        return self._call(_LIST_CONVERSATIONS, request, timeout_s)

    def get_conversation(
        self,
        username: str,
        graphname: str,
        conversation_id: str,
        *,
        page_size: int = 0,
        page_token: str = "",
        timeout_s: float | None = None,
    ) -> pb.GetConversationResponse:
        request = pb.GetConversationRequest(
            username=username,
            graphname=graphname,
            conversation_id=conversation_id,
            page_size=page_size,
            page_token=page_token,
        )
        return self._call(_GET_CONVERSATION, request, timeout_s)

    def submit_feedback(
        self,
        username: str,
        graphname: str,
        message_id: str,
        feedback: pb.Feedback.ValueType,
        *,
        comment: str = "",
        timeout_s: float | None = None,
    ) -> pb.SubmitFeedbackResponse:
        request = pb.SubmitFeedbackRequest(
            username=username,
            graphname=graphname,
            message_id=message_id,
            feedback=feedback,
            comment=comment,
        )
        return self._call(_SUBMIT_FEEDBACK, request, timeout_s)

    def rename_conversation(
        self,
        username: str,
        graphname: str,
        conversation_id: str,
        name: str,
        *,
        timeout_s: float | None = None,
    ) -> pb.RenameConversationResponse:
        request = pb.RenameConversationRequest(
            username=username, graphname=graphname, conversation_id=conversation_id, name=name
        )
        return self._call(_RENAME_CONVERSATION, request, timeout_s)

    def delete_conversation(
        self,
        username: str,
        graphname: str,
        conversation_id: str,
        *,
        timeout_s: float | None = None,
    ) -> pb.DeleteConversationResponse:
        request = pb.DeleteConversationRequest(
            username=username, graphname=graphname, conversation_id=conversation_id
        )
        return self._call(_DELETE_CONVERSATION, request, timeout_s)

    # --- Long-term memory ------------------------------------------------------------------

    def search_facts(
        self,
        username: str,
        graphname: str,
        query: str,
        *,
        top_k: int = 0,
        threshold: float | None = None,
        as_of_valid_time: datetime | None = None,
        as_of_transaction_time: datetime | None = None,
        timeout_s: float | None = None,
    ) -> pb.SearchFactsResponse:
        """`threshold` None means the server's default; as-of times must be timezone-aware."""
        request = _search_facts_request(
            username,
            graphname,
            query,
            top_k,
            threshold,
            as_of_valid_time,
            as_of_transaction_time,
        )
        return self._call(_SEARCH_FACTS, request, timeout_s)

    def list_facts(
        self,
        username: str,
        graphname: str,
        *,
        page_size: int = 0,
        page_token: str = "",
        as_of_valid_time: datetime | None = None,
        as_of_transaction_time: datetime | None = None,
        timeout_s: float | None = None,
    ) -> pb.ListFactsResponse:
        request = pb.ListFactsRequest(
            username=username,
            graphname=graphname,
            page_size=page_size,
            page_token=page_token,
            as_of_valid_time=_timestamp(as_of_valid_time),
            as_of_transaction_time=_timestamp(as_of_transaction_time),
        )
        return self._call(_LIST_FACTS, request, timeout_s)

    def get_fact(
        self, username: str, graphname: str, fact_id: str, *, timeout_s: float | None = None
    ) -> pb.GetFactResponse:
        request = pb.GetFactRequest(username=username, graphname=graphname, fact_id=fact_id)
        return self._call(_GET_FACT, request, timeout_s)

    def get_fact_history(
        self, username: str, graphname: str, fact_id: str, *, timeout_s: float | None = None
    ) -> pb.GetFactHistoryResponse:
        request = pb.GetFactHistoryRequest(username=username, graphname=graphname, fact_id=fact_id)
        return self._call(_GET_FACT_HISTORY, request, timeout_s)

    def add_fact(
        self,
        username: str,
        graphname: str,
        text: str,
        *,
        kind: str = "",
        timeout_s: float | None = None,
    ) -> pb.AddFactResponse:
        request = pb.AddFactRequest(username=username, graphname=graphname, text=text, kind=kind)
        return self._call(_ADD_FACT, request, timeout_s)

    def update_fact(
        self,
        username: str,
        graphname: str,
        fact_id: str,
        text: str,
        *,
        kind: str = "",
        timeout_s: float | None = None,
    ) -> pb.UpdateFactResponse:
        request = pb.UpdateFactRequest(
            username=username, graphname=graphname, fact_id=fact_id, text=text, kind=kind
        )
        return self._call(_UPDATE_FACT, request, timeout_s)

    def delete_fact(
        self,
        username: str,
        graphname: str,
        fact_id: str,
        *,
        ended: bool = False,
        timeout_s: float | None = None,
    ) -> pb.DeleteFactResponse:
        request = pb.DeleteFactRequest(
            username=username, graphname=graphname, fact_id=fact_id, ended=ended
        )
        return self._call(_DELETE_FACT, request, timeout_s)

    def forget_scope(
        self,
        username: str,
        graphname: str,
        *,
        include_conversations: bool = False,
        timeout_s: float | None = None,
    ) -> pb.ForgetScopeResponse:
        request = pb.ForgetScopeRequest(
            username=username, graphname=graphname, include_conversations=include_conversations
        )
        return self._call(_FORGET_SCOPE, request, timeout_s)

    # --- Health ----------------------------------------------------------------------------

    def health(self, service: str = SERVICE_NAME, *, timeout_s: float | None = None) -> bool:
        """True when the server reports `service` SERVING ("" asks about the whole server)."""
        request = health_pb2.HealthCheckRequest(service=service)
        response = self._call(_HEALTH_CHECK, request, timeout_s)
        return bool(response.status == health_pb2.HealthCheckResponse.SERVING)
