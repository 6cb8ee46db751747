"""The gRPC edge: validate, call the domain, map results and errors back. No SQL, no rules."""

from __future__ import annotations

import base64
import binascii
import functools
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import grpc
from google.protobuf.timestamp_pb2 import Timestamp

from memory_client.v1 import memory_pb2 as pb
from memory_client.v1 import memory_pb2_grpc as pb_grpc
from memory_server import logs
from memory_server.api import validation as v
from memory_server.api.errors import to_status
from memory_server.memory.errors import Disabled, InvalidArgument
from memory_server.memory.facts import FactKind, FactVersion
from memory_server.memory.identity import Scope
from memory_server.memory.ltm import LongTermMemory
from memory_server.memory.model import (
    ConversationInfo,
    Feedback,
    MemoryContext,
    NewMessage,
    Role,
    StoredMessage,
)
from memory_server.memory.ports import AsOf
from memory_server.memory.turns import ConversationMemory, ReplyFields
from memory_server.settings import Settings

log = logging.getLogger(__name__)

Req = TypeVar("Req")
Resp = TypeVar("Resp")
Handler = Callable[[Any, Req, grpc.aio.ServicerContext], Awaitable[Resp]]

_ROLE_TO_PB = {
    Role.USER: pb.ROLE_USER,
    Role.ASSISTANT: pb.ROLE_ASSISTANT,
    Role.SYSTEM: pb.ROLE_SYSTEM,
}
_ROLE_FROM_PB = {value: key for key, value in _ROLE_TO_PB.items()}

LIST_CONVERSATIONS_PAGE = (50, 500)  # (default, maximum)
GET_CONVERSATION_PAGE = (100, 1000)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _timestamp(value: datetime) -> Timestamp:
    # Three times cheaper than Timestamp.FromDatetime, and a context carries dozens of them.
    if value.tzinfo is None:
        # asyncpg reads PostgreSQL's ±infinity as naive datetime.max/min: it writes the ends of
        # the Timestamp range (0001-01-01T00:00:00Z, 9999-12-31T23:59:59.999999Z) as infinity.
        value = value.replace(tzinfo=UTC)
    delta = value - _EPOCH
    return Timestamp(seconds=delta.days * 86400 + delta.seconds, nanos=delta.microseconds * 1000)


def message_pb(m: StoredMessage) -> pb.Message:
    return pb.Message(
        message_id=m.message_id,
        conversation_id=m.conversation_id,
        role=_ROLE_TO_PB[m.role],
        content=m.content,
        model=m.model,
        parent_id=m.parent_id,
        response_time_seconds=m.response_time_seconds,
        feedback=int(m.feedback),  # type: ignore[arg-type]
        comment=m.comment,
        created_at=_timestamp(m.created_at),
        tokens=m.tokens,
    )


def conversation_pb(c: ConversationInfo) -> pb.Conversation:
    return pb.Conversation(
        conversation_id=c.conversation_id,
        name=c.name,
        created_at=_timestamp(c.created_at),
        updated_at=_timestamp(c.updated_at),
        message_count=c.message_count,
    )


def context_pb(c: MemoryContext) -> pb.MemoryContext:
    return pb.MemoryContext(
        summary=c.summary.content if c.summary else "",
        summary_tokens=c.summary.tokens if c.summary else 0,
        summary_through_message_id=c.summary.through_message_id if c.summary else "",
        recent_messages=[
            pb.ContextMessage(
                message_id=m.message_id,
                role=_ROLE_TO_PB[m.role],
                content=m.content,
                tokens=m.tokens,
                created_at=_timestamp(m.created_at),
            )
            for m in c.recent
        ],
        recent_tokens=c.recent_tokens,
        long_term=pb.LongTermMemory(
            tokens=c.long_term_tokens,
            facts=[
                pb.RecalledFact(fact_id=f.fact_id, text=f.text, score=f.score, standing=f.standing)
                for f in c.long_term.facts
            ],
            degraded=bool(c.long_term.degraded_reason),
            degraded_reason=c.long_term.degraded_reason,
        ),
        rendered=c.rendered,
        total_tokens=c.total_tokens,
        budget_tokens=c.budget_tokens,
        omitted_messages=c.omitted_messages,
    )


def _feedback(field: str, value: int) -> Feedback:
    try:
        return Feedback(value)
    except ValueError:
        raise InvalidArgument(field, f"unknown value {value}") from None


def _scope(request: Any) -> Scope:
    """The request's validated scope; its hash goes on every log record of the call."""
    scope = v.scope(request.username, request.graphname)
    logs.scope_hash.set(scope.scope_hash)
    return scope


def rpc(handler: Handler[Req, Resp]) -> Handler[Req, Resp]:
    """Maps errors to statuses in one place. Anything the table does not know escapes to the
    edge (api.interceptors), which logs it once with the request id and answers INTERNAL."""

    @functools.wraps(handler)
    async def wrapper(self: Any, request: Req, context: grpc.aio.ServicerContext) -> Resp:
        try:
            self._memory  # noqa: B018 - a disabled server refuses before looking at the input
            return await handler(self, request, context)
        except grpc.aio.AbortError:
            raise
        except Exception as exc:
            code, message = to_status(exc)
            if code is grpc.StatusCode.INTERNAL:
                raise
            if code is grpc.StatusCode.DEADLINE_EXCEEDED:
                log.info("%s: %s", handler.__name__, message)
            await context.abort(code, message)
            raise AssertionError("unreachable") from exc

    return wrapper


class MemoryServicer(pb_grpc.MemoryServiceServicer):
    def __init__(
        self,
        settings: Settings,
        memory: ConversationMemory | None,
        ltm: LongTermMemory | None = None,
    ) -> None:
        """`memory` is None when memory is disabled: every RPC then answers
        FAILED_PRECONDITION while health keeps serving."""
        self._settings = settings
        self._enabled_memory = memory
        self._enabled_ltm = ltm

    @property
    def _ltm(self) -> LongTermMemory:
        if self._enabled_ltm is None:
            raise Disabled("long-term memory is disabled on this server")
        return self._enabled_ltm

    @property
    def _memory(self) -> ConversationMemory:
        if self._enabled_memory is None:
            raise Disabled("memory is disabled on this server (memory_config.enabled is false)")
        return self._enabled_memory

    def _budget(self, context: grpc.aio.ServicerContext) -> float:
        remaining = context.time_remaining()
        limit = self._settings.request_timeout_seconds
        return limit if remaining is None else max(0.001, min(remaining, limit))

    def _content(self, field: str, value: str, *, required: bool = True) -> str:
        return v.content(field, value, self._settings.max_message_bytes, required=required)

    @rpc
    async def StartTurn(
        self, request: pb.StartTurnRequest, context: grpc.aio.ServicerContext
    ) -> pb.StartTurnResponse:
        scope = _scope(request)
        conversation_id = v.identifier("conversation_id", request.conversation_id)
        turn = await self._memory.start_turn(
            scope,
            conversation_id,
            self._content("content", request.content),
            message_id=v.identifier("message_id", request.message_id, required=False),
            conversation_name=v.short_text(
                "conversation_name", request.conversation_name, v.MAX_NAME_CHARS
            ),
            timeout_s=self._budget(context),
        )
        return pb.StartTurnResponse(
            message=message_pb(turn.message),
            context=context_pb(turn.context),
            conversation_created=turn.conversation_created,
        )

    @rpc
    async def CompleteTurn(
        self, request: pb.CompleteTurnRequest, context: grpc.aio.ServicerContext
    ) -> pb.CompleteTurnResponse:
        scope = _scope(request)
        conversation_id = v.identifier("conversation_id", request.conversation_id)
        reply = ReplyFields(
            model=v.short_text("model", request.model, v.MAX_ID_CHARS),
            parent_id=v.identifier("parent_id", request.parent_id, required=False),
            response_time_seconds=v.duration_seconds(
                "response_time_seconds", request.response_time_seconds
            ),
        )
        done = await self._memory.complete_turn(
            scope,
            conversation_id,
            self._content("content", request.content),
            reply,
            message_id=v.identifier("message_id", request.message_id, required=False),
            timeout_s=self._budget(context),
        )
        return pb.CompleteTurnResponse(
            message=message_pb(done.message), compacted_inline=done.compacted_inline
        )

    @rpc
    async def GetContext(
        self, request: pb.GetContextRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetContextResponse:
        scope = _scope(request)
        conversation_id = v.identifier("conversation_id", request.conversation_id)
        question = self._content("question", request.question, required=False)
        memory_context, exists = await self._memory.get_context(
            scope, conversation_id, question, timeout_s=self._budget(context)
        )
        return pb.GetContextResponse(context=context_pb(memory_context), conversation_exists=exists)

    @rpc
    async def AppendMessages(
        self, request: pb.AppendMessagesRequest, context: grpc.aio.ServicerContext
    ) -> pb.AppendMessagesResponse:
        scope = _scope(request)
        conversation_id = v.identifier("conversation_id", request.conversation_id)
        if not request.messages:
            raise InvalidArgument("messages", "must not be empty")
        if len(request.messages) > self._settings.max_messages_per_append:
            raise InvalidArgument(
                "messages",
                f"{len(request.messages)} messages; the limit is "
                f"{self._settings.max_messages_per_append} per call",
            )
        messages = []
        seen: set[str] = set()
        for i, m in enumerate(request.messages):
            field = f"messages[{i}]"
            role = _ROLE_FROM_PB.get(m.role)
            if role is None:
                raise InvalidArgument(f"{field}.role", "must be USER, ASSISTANT or SYSTEM")
            message_id = v.identifier(f"{field}.message_id", m.message_id, required=False)
            if message_id and message_id in seen:
                raise InvalidArgument(f"{field}.message_id", "repeats an earlier message's id")
            seen.add(message_id)
            messages.append(
                NewMessage(
                    role=role,
                    content=self._content(f"{field}.content", m.content),
                    tokens=0,  # counted by the domain
                    context_tokens=0,
                    message_id=message_id,
                    model=v.short_text(f"{field}.model", m.model, v.MAX_ID_CHARS),
                    parent_id=v.identifier(f"{field}.parent_id", m.parent_id, required=False),
                    response_time_seconds=v.duration_seconds(
                        f"{field}.response_time_seconds", m.response_time_seconds
                    ),
                    feedback=_feedback(f"{field}.feedback", m.feedback),
                    comment=v.short_text(f"{field}.comment", m.comment, v.MAX_COMMENT_BYTES),
                    created_at=_time(f"{field}.created_at", m, "created_at"),
                )
            )
        outcome = await self._memory.append_messages(
            scope,
            conversation_id,
            messages,
            conversation_name=v.short_text(
                "conversation_name", request.conversation_name, v.MAX_NAME_CHARS
            ),
            timeout_s=self._budget(context),
        )
        return pb.AppendMessagesResponse(
            message_ids=[m.message_id for m in outcome.messages],
            inserted=outcome.inserted,
            skipped=len(outcome.messages) - outcome.inserted,
            conversation_created=outcome.conversation_created,
        )

    @rpc
    async def ListConversations(
        self, request: pb.ListConversationsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListConversationsResponse:
        scope = _scope(request)
        page = await self._memory.list_conversations(
            scope,
            v.page_size("page_size", request.page_size, *LIST_CONVERSATIONS_PAGE),
            request.page_token,
            timeout_s=self._budget(context),
        )
        return pb.ListConversationsResponse(
            conversations=[conversation_pb(c) for c in page.items],
            next_page_token=page.next_cursor,
        )

    @rpc
    async def GetConversation(
        self, request: pb.GetConversationRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetConversationResponse:
        scope = _scope(request)
        info, page = await self._memory.get_conversation(
            scope,
            v.identifier("conversation_id", request.conversation_id),
            v.page_size("page_size", request.page_size, *GET_CONVERSATION_PAGE),
            request.page_token,
            timeout_s=self._budget(context),
            # Half the largest response: room for the conversation and protobuf's framing.
            page_bytes=self._settings.max_request_bytes // 2,
        )
        return pb.GetConversationResponse(
            conversation=conversation_pb(info),
            messages=[message_pb(m) for m in page.items],
            next_page_token=page.next_cursor,
        )

    @rpc
    async def SubmitFeedback(
        self, request: pb.SubmitFeedbackRequest, context: grpc.aio.ServicerContext
    ) -> pb.SubmitFeedbackResponse:
        scope = _scope(request)
        message = await self._memory.submit_feedback(
            scope,
            v.identifier("message_id", request.message_id),
            _feedback("feedback", request.feedback),
            v.short_text("comment", request.comment, v.MAX_COMMENT_BYTES),
            timeout_s=self._budget(context),
        )
        return pb.SubmitFeedbackResponse(message=message_pb(message))

    @rpc
    async def RenameConversation(
        self, request: pb.RenameConversationRequest, context: grpc.aio.ServicerContext
    ) -> pb.RenameConversationResponse:
        scope = _scope(request)
        info = await self._memory.rename_conversation(
            scope,
            v.identifier("conversation_id", request.conversation_id),
            v.short_text("name", request.name, v.MAX_NAME_CHARS),
            timeout_s=self._budget(context),
        )
        return pb.RenameConversationResponse(conversation=conversation_pb(info))

    @rpc
    async def DeleteConversation(
        self, request: pb.DeleteConversationRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteConversationResponse:
        scope = _scope(request)
        deleted = await self._memory.delete_conversation(
            scope,
            v.identifier("conversation_id", request.conversation_id),
            timeout_s=self._budget(context),
        )
        return pb.DeleteConversationResponse(deleted_messages=deleted)

    # --- long-term memory ------------------------------------------------------------------

    @rpc
    async def SearchFacts(
        self, request: pb.SearchFactsRequest, context: grpc.aio.ServicerContext
    ) -> pb.SearchFactsResponse:
        scope = _scope(request)
        query = self._content("query", request.query)
        if request.top_k < 0 or request.top_k > MAX_TOP_K:
            raise InvalidArgument("top_k", f"must be between 0 and {MAX_TOP_K}")
        threshold = self._settings.ltm_score_threshold
        if request.HasField("threshold"):
            threshold = request.threshold
            if not 0.0 <= threshold <= 1.0:
                raise InvalidArgument("threshold", "must be between 0 and 1")
        found = await self._ltm.search(
            scope,
            query,
            top_k=request.top_k or self._settings.ltm_top_k,
            threshold=threshold,
            as_of=_as_of(request),
        )
        return pb.SearchFactsResponse(
            results=[
                pb.ScoredFact(
                    fact=fact_pb(s.version),
                    score=s.score,
                    vector_score=s.vector_score,
                    lexical_score=s.lexical_score,
                )
                for s in found
            ]
        )

    @rpc
    async def ListFacts(
        self, request: pb.ListFactsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListFactsResponse:
        scope = _scope(request)
        size = v.page_size("page_size", request.page_size, *LIST_FACTS_PAGE)
        offset = _offset_token(request.page_token)
        facts = await self._ltm.list_facts(
            scope,
            _as_of(request),
            size + 1,
            offset,
        )
        token = _encode_offset(offset + size) if len(facts) > size else ""
        return pb.ListFactsResponse(facts=[fact_pb(f) for f in facts[:size]], next_page_token=token)

    @rpc
    async def GetFact(
        self, request: pb.GetFactRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetFactResponse:
        scope = _scope(request)
        versions = await self._ltm.get_fact(scope, v.identifier("fact_id", request.fact_id))
        live = [f for f in versions if f.superseded_at is None and f.valid_to is None]
        response = pb.GetFactResponse(versions=[fact_pb(f) for f in versions])
        if live:
            response.current.CopyFrom(fact_pb(live[0]))
        return response

    @rpc
    async def GetFactHistory(
        self, request: pb.GetFactHistoryRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetFactHistoryResponse:
        scope = _scope(request)
        events = await self._ltm.history(scope, v.identifier("fact_id", request.fact_id))
        return pb.GetFactHistoryResponse(
            events=[
                pb.FactEvent(
                    event=e.event,
                    at=_timestamp(e.at),
                    version_id=e.version_id,
                    conversation_id=e.conversation_id,
                    message_id=e.message_id,
                    extractor=e.extractor,
                    detail=e.detail,
                )
                for e in events
            ]
        )

    @rpc
    async def AddFact(
        self, request: pb.AddFactRequest, context: grpc.aio.ServicerContext
    ) -> pb.AddFactResponse:
        scope = _scope(request)
        text = v.short_text("text", self._content("text", request.text).strip(), MAX_FACT_CHARS)
        change = await self._ltm.add_fact(scope, text, _kind(request.kind) or FactKind.OTHER)
        return pb.AddFactResponse(fact=await self._fact_version(scope, change.fact_id))

    @rpc
    async def UpdateFact(
        self, request: pb.UpdateFactRequest, context: grpc.aio.ServicerContext
    ) -> pb.UpdateFactResponse:
        scope = _scope(request)
        fact_id = v.identifier("fact_id", request.fact_id)
        text = v.short_text("text", self._content("text", request.text).strip(), MAX_FACT_CHARS)
        change = await self._ltm.update_fact(scope, fact_id, text, _kind(request.kind))
        return pb.UpdateFactResponse(fact=await self._fact_version(scope, change.fact_id))

    @rpc
    async def DeleteFact(
        self, request: pb.DeleteFactRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteFactResponse:
        scope = _scope(request)
        await self._ltm.delete_fact(
            scope, v.identifier("fact_id", request.fact_id), ended=request.ended
        )
        return pb.DeleteFactResponse()

    @rpc
    async def ForgetScope(
        self, request: pb.ForgetScopeRequest, context: grpc.aio.ServicerContext
    ) -> pb.ForgetScopeResponse:
        scope = _scope(request)
        counts = await self._ltm.forget_scope(scope, include_messages=request.include_conversations)
        return pb.ForgetScopeResponse(
            facts=counts["facts"], versions=counts["versions"], messages=counts["messages"]
        )

    async def _fact_version(self, scope: Scope, fact_id: str) -> pb.Fact:
        versions = await self._ltm.get_fact(scope, fact_id)
        live = [f for f in versions if f.superseded_at is None and f.valid_to is None]
        return fact_pb(live[0] if live else versions[-1])


MAX_TOP_K = 100
MAX_FACT_CHARS = 2000
LIST_FACTS_PAGE = (100, 1000)


def fact_pb(f: FactVersion) -> pb.Fact:
    fact = pb.Fact(
        fact_id=f.fact_id,
        version_id=f.version_id,
        text=f.text,
        kind=f.kind.value,
        valid_from=_timestamp(f.valid_from),
        recorded_at=_timestamp(f.recorded_at),
        conversation_id=f.conversation_id,
        message_id=f.message_id,
        extractor=f.extractor,
    )
    if f.valid_to is not None:
        fact.valid_to.CopyFrom(_timestamp(f.valid_to))
    if f.superseded_at is not None:
        fact.superseded_at.CopyFrom(_timestamp(f.superseded_at))
    return fact


def _time(field: str, message: Any, name: str) -> datetime | None:
    """The message's Timestamp field `name`, validated; None when it is not set."""
    if not message.HasField(name):
        return None
    value: Timestamp = getattr(message, name)
    return v.timestamp(field, value.seconds, value.nanos)


def _as_of(request: pb.SearchFactsRequest | pb.ListFactsRequest) -> AsOf:
    return AsOf(
        valid_time=_time("as_of_valid_time", request, "as_of_valid_time"),
        transaction_time=_time("as_of_transaction_time", request, "as_of_transaction_time"),
    )


def _kind(value: str) -> FactKind | None:
    if not value:
        return None
    try:
        return FactKind(value.lower())
    except ValueError:
        kinds = ", ".join(k.value for k in FactKind)
        raise InvalidArgument("kind", f"must be one of {kinds}") from None


def _encode_offset(offset: int) -> str:
    return base64.urlsafe_b64encode(f"o:{offset}".encode()).decode().rstrip("=")


def _offset_token(token: str) -> int:
    if not token:
        return 0
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
        prefix, value = raw.split(":", 1)
        if prefix == "o" and value.isascii() and value.isdigit() and int(value) < 2**63:
            return int(value)
    except (ValueError, UnicodeError, binascii.Error):
        pass
    raise InvalidArgument("page_token", "not a token this service issued")
