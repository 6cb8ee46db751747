"""The edge's translations: domain values to protobuf messages and back (roles, feedback, fact
kinds, timestamps, the fact-list page token). No validation of identity or text here; that is
api.validation."""

from __future__ import annotations

import base64
import binascii
from datetime import UTC, datetime

from google.protobuf.timestamp_pb2 import Timestamp

from memory_client.v1 import memory_pb2 as pb
from memory_server.memory.conversation.model import (
    ConversationInfo,
    Feedback,
    FeedbackEntry,
    MemoryContext,
    RecalledFact,
    Role,
    StoredMessage,
)
from memory_server.memory.errors import InvalidArgument
from memory_server.memory.facts.model import FactKind, FactVersion, HistoryEvent
from memory_server.memory.ports import FactLink

_ROLE_TO_PB = {
    Role.USER: pb.ROLE_USER,
    Role.ASSISTANT: pb.ROLE_ASSISTANT,
    Role.SYSTEM: pb.ROLE_SYSTEM,
}
_ROLE_FROM_PB: dict[int, Role] = {value: key for key, value in _ROLE_TO_PB.items()}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def timestamp(value: datetime) -> Timestamp:
    # Three times cheaper than Timestamp.FromDatetime, and a context carries dozens of them.
    if value.tzinfo is None:
        # asyncpg reads PostgreSQL's ±infinity as naive datetime.max/min: it writes the ends of
        # the Timestamp range (0001-01-01T00:00:00Z, 9999-12-31T23:59:59.999999Z) as infinity.
        value = value.replace(tzinfo=UTC)
    delta = value - _EPOCH
    return Timestamp(seconds=delta.days * 86400 + delta.seconds, nanos=delta.microseconds * 1000)


def role(field: str, value: int) -> Role:
    found = _ROLE_FROM_PB.get(value)
    if found is None:
        raise InvalidArgument(field, "must be USER, ASSISTANT or SYSTEM")
    return found


def feedback(field: str, value: int) -> Feedback:
    try:
        return Feedback(value)
    except ValueError:
        raise InvalidArgument(field, f"unknown value {value}") from None


def fact_kind(value: str, field: str = "kind") -> FactKind | None:
    if not value:
        return None
    try:
        return FactKind(value.lower())
    except ValueError:
        kinds = ", ".join(k.value for k in FactKind)
        raise InvalidArgument(field, f"must be one of {kinds}") from None


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
        created_at=timestamp(m.created_at),
        tokens=m.tokens,
    )


def feedback_entry_pb(entry: FeedbackEntry) -> pb.FeedbackEntry:
    return pb.FeedbackEntry(
        username=entry.username,
        message=message_pb(entry.message),
        feedback_at=None if entry.feedback_at is None else timestamp(entry.feedback_at),
    )


def conversation_pb(c: ConversationInfo) -> pb.Conversation:
    return pb.Conversation(
        conversation_id=c.conversation_id,
        name=c.name,
        created_at=timestamp(c.created_at),
        updated_at=timestamp(c.updated_at),
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
                created_at=timestamp(m.created_at),
            )
            for m in c.recent
        ],
        recent_tokens=c.recent_tokens,
        long_term=pb.LongTermMemory(
            tokens=c.long_term_tokens,
            facts=[recalled_pb(f) for f in c.long_term.facts],
            degraded=bool(c.long_term.degraded_reason),
            degraded_reason=c.long_term.degraded_reason,
            episodes=[
                pb.RecalledEpisode(
                    message_id=e.message.message_id,
                    conversation_id=e.message.conversation_id,
                    role=_ROLE_TO_PB[e.message.role],
                    content=e.message.content,
                    created_at=timestamp(e.message.created_at),
                    score=e.score,
                )
                for e in c.long_term.episodes
            ],
            episode_tokens=c.episode_tokens,
        ),
        rendered=c.rendered,
        total_tokens=c.total_tokens,
        budget_tokens=c.budget_tokens,
        omitted_messages=c.omitted_messages,
    )


def recalled_pb(f: RecalledFact) -> pb.RecalledFact:
    fact = pb.RecalledFact(fact_id=f.fact_id, text=f.text, score=f.score, standing=f.standing)
    if f.valid_from is not None:
        fact.valid_from.CopyFrom(timestamp(f.valid_from))
    if f.event is not None:
        fact.event_time.CopyFrom(timestamp(f.event.at))
        fact.event_period = f.event.period.value
    return fact


def fact_pb(f: FactVersion) -> pb.Fact:
    fact = pb.Fact(
        fact_id=f.fact_id,
        version_id=f.version_id,
        text=f.text,
        kind=f.kind.value,
        valid_from=timestamp(f.valid_from),
        recorded_at=timestamp(f.recorded_at),
        conversation_id=f.conversation_id,
        message_id=f.message_id,
        extractor=f.extractor,
    )
    if f.valid_to is not None:
        fact.valid_to.CopyFrom(timestamp(f.valid_to))
    if f.superseded_at is not None:
        fact.superseded_at.CopyFrom(timestamp(f.superseded_at))
    if f.event_at is not None:
        fact.event_time.CopyFrom(timestamp(f.event_at))
        fact.event_period = f.event_period
    return fact


def current_version(versions: list[FactVersion]) -> FactVersion | None:
    """The version believed now and still valid, if the fact has one."""
    live = [f for f in versions if f.superseded_at is None and f.valid_to is None]
    return live[0] if live else None


def fact_link_pb(link: FactLink) -> pb.FactLink:
    return pb.FactLink(
        fact_id=link.linked_fact_id,
        version_id=link.linked_version_id,
        score=link.score,
        recorded_at=timestamp(link.recorded_at),
    )


def fact_event_pb(e: HistoryEvent) -> pb.FactEvent:
    return pb.FactEvent(
        event=e.event,
        at=timestamp(e.at),
        version_id=e.version_id,
        conversation_id=e.conversation_id,
        message_id=e.message_id,
        extractor=e.extractor,
        detail=e.detail,
    )


def encode_offset(offset: int) -> str:
    return base64.urlsafe_b64encode(f"o:{offset}".encode()).decode().rstrip("=")


def decode_offset(token: str) -> int:
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
