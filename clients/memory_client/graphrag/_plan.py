"""The migration's planner: chat-history's records → per conversation, the batches of NewMessage
to send (or the problems that keep it from being sent), counting into the report what it leaves
out."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import groupby

from google.protobuf.timestamp_pb2 import Timestamp

from memory_client.graphrag._legacy import LegacyConversation, LegacyMessage
from memory_client.graphrag._report import MigrationReport
from memory_client.v1 import memory_pb2 as pb

__all__ = ["DEFAULT_BATCH_SIZE", "MAX_BATCH_BYTES", "ConversationPlan", "plan_conversations"]

DEFAULT_BATCH_SIZE = 500
# Under gRPC's default 4 MiB limit on a received message, with room for the request's other
# fields (a server may keep the default even though ours raises it).
MAX_BATCH_BYTES = 4_000_000

# In GraphRAG "system" is the assistant's reply, not a system prompt.
_ROLES = {"user": pb.ROLE_USER, "system": pb.ROLE_ASSISTANT, "assistant": pb.ROLE_ASSISTANT}
_EARLIEST = datetime.min.replace(tzinfo=UTC)


@dataclass(frozen=True)
class ConversationPlan:
    conversation: LegacyConversation
    batches: list[list[pb.NewMessage]]
    problems: list[str]  # when not empty, nothing is sent for the conversation


def plan_conversations(
    conversations: Iterable[LegacyConversation],
    messages: Iterable[LegacyMessage],
    report: MigrationReport,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    max_batch_bytes: int = MAX_BATCH_BYTES,
) -> Iterator[ConversationPlan]:
    """One plan per live conversation; what is left out is counted into `report`. `messages`
    must be grouped by conversation_id, as `read_messages` yields them."""
    live: dict[str, LegacyConversation] = {}
    for conversation in conversations:
        if conversation.deleted:
            report.conversations_deleted += 1
        else:
            live[conversation.conversation_id] = conversation
    report.conversations_seen = len(live)
    done: set[str] = set()
    for conversation_id, group in groupby(messages, key=lambda m: m.conversation_id):
        if conversation_id in done:
            raise ValueError(f"messages of {conversation_id!r} are not grouped together")
        done.add(conversation_id)
        rows = list(group)
        owner = live.get(conversation_id)
        if owner is None:
            report.messages_deleted += sum(m.deleted for m in rows)
            report.messages_orphaned += sum(not m.deleted for m in rows)
        else:
            yield _plan(owner, rows, report, batch_size, max_batch_bytes)
    yield from (ConversationPlan(c, [], []) for i, c in live.items() if i not in done)


def _plan(
    conversation: LegacyConversation,
    rows: list[LegacyMessage],
    report: MigrationReport,
    batch_size: int,
    max_batch_bytes: int,
) -> ConversationPlan:
    # message_id → (its first row, which gives its time and place; its newest row, which gives
    # the rest: old chat-history versions recorded feedback by writing the message again)
    kept: dict[str, tuple[LegacyMessage, LegacyMessage]] = {}
    problems: list[str] = []
    for row in rows:
        if row.deleted:
            report.messages_deleted += 1
        elif not row.content.strip():
            report.messages_empty += 1
        elif row.role.strip().lower() not in _ROLES:
            report.messages_unsupported_role += 1
        else:
            message_id = row.message_id
            if not message_id:
                message_id = f"chat-history-{row.row_id}"
                report.messages_id_generated += 1
            problems.extend(f"message {message_id}: {p}" for p in row.problems)
            if message_id in kept:
                report.messages_duplicate += 1
            kept[message_id] = (kept.get(message_id, (row, row))[0], row)
    if problems:
        return ConversationPlan(conversation, [], problems)
    ordered = sorted(
        kept.items(), key=lambda kv: (kv[1][0].created_at or _EARLIEST, kv[1][0].row_id)
    )
    known: set[str] = set()
    planned: list[pb.NewMessage] = []
    for message_id, (first, newest) in ordered:
        parent_id = newest.parent_id
        if parent_id and parent_id not in known:
            # The server refuses a parent it has not stored in this conversation; one that was
            # deleted, empty or elsewhere is not worth failing the conversation for.
            report.parents_cleared += 1
            parent_id = ""
        known.add(message_id)
        assert first.created_at is not None  # a row without one has a problem
        stamp = Timestamp()
        stamp.FromDatetime(first.created_at)
        planned.append(
            pb.NewMessage(
                message_id=message_id,
                role=_ROLES[newest.role.strip().lower()],
                content=newest.content,
                model=newest.model,
                parent_id=parent_id,
                response_time_seconds=newest.response_time_seconds,
                feedback=pb.Feedback.ValueType(newest.feedback),
                comment=newest.comment,
                created_at=stamp,
            )
        )
    return ConversationPlan(conversation, _batches(planned, batch_size, max_batch_bytes), [])


def _batches(
    messages: list[pb.NewMessage], batch_size: int, max_bytes: int
) -> list[list[pb.NewMessage]]:
    batches: list[list[pb.NewMessage]] = []
    size = 0
    for message in messages:
        n = message.ByteSize() + 8  # with the repeated field's tag and length
        if not batches or len(batches[-1]) >= batch_size or size + n > max_bytes:
            batches.append([])
            size = 0
        batches[-1].append(message)
        size += n
    return batches
