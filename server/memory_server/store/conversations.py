"""PostgreSQL adapter for the domain's ConversationStore (asyncpg).

Every query is confined to the caller's scope by joining `scopes` on (username, graphname): an
id from another scope simply matches nothing, which the domain reports as NOT_FOUND.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from datetime import datetime

import asyncpg

from memory_server.memory.errors import AlreadyExists, InvalidArgument, NotFound
from memory_server.memory.identity import Scope
from memory_server.memory.model import (
    AppendOutcome,
    ContextCandidates,
    ConversationInfo,
    Feedback,
    NewMessage,
    Page,
    Role,
    StoredMessage,
    Summary,
)
from memory_server.store.scope_lock import lock_scope

_APPEND = """
SELECT out_seq, out_created_at, out_inserted, out_conversation_created
FROM memory_append_message($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15,
                           $16, $17)
"""

_FIND_CONVERSATION = """
SELECT c.id FROM conversations c JOIN scopes s ON s.id = c.scope_id
WHERE s.username = $1 AND s.graphname = $2 AND c.conversation_id = $3
"""

# memory_append_message's own SQLSTATEs (migrations/0001_conversations.sql).
_NO_CONVERSATION, _NO_PARENT, _ID_TAKEN = "GMNF1", "GMNF2", "GMAE1"

_MESSAGE_COLUMNS = """m.seq, m.message_id, c.conversation_id, m.role, m.content, m.tokens,
    m.context_tokens, m.created_at, m.model, m.parent_id, m.response_time_seconds, m.feedback,
    m.comment"""


def _conversation_and_summary(summary_bound: str = "") -> str:
    """The caller's conversation ($1 username, $2 graphname, $3 conversation_id) and its
    current summary (the newest one meeting `summary_bound`), as the head of the two statements
    below; _summary() reads the columns back."""
    return f"""WITH conversation AS (
    SELECT c.id, c.conversation_id FROM conversations c JOIN scopes s ON s.id = c.scope_id
    WHERE s.username = $1 AND s.graphname = $2 AND c.conversation_id = $3
),
summary AS (
    SELECT cs.content, cs.tokens, cs.context_tokens, cs.through_seq,
           m.message_id AS through_message_id
    FROM conversation_summaries cs JOIN messages m ON m.seq = cs.through_seq
    WHERE cs.conversation_pk = (SELECT id FROM conversation) {summary_bound}
    ORDER BY cs.through_seq DESC LIMIT 1
),"""


_SUMMARY_COLUMNS = """summary.content AS summary_content, summary.tokens AS summary_tokens,
       summary.context_tokens AS summary_context_tokens, summary.through_seq,
       summary.through_message_id, (SELECT conversation_id FROM conversation)"""

# One statement, so one snapshot: the conversation, its current summary, and the newest
# unsummarized messages first with their running cost; rows past the budget are cut in the
# database, but the newest always comes back so the total count is known. At least one row.
# Everything is bounded by $4, the seq of the turn's own message: messages with a smaller seq
# are exactly those stored before it (the scope write lock makes seq order commit order), and a
# summary folded later, over the message itself and what came after, must not stand in for them.
_CONTEXT_CANDIDATES = f"""
{_conversation_and_summary("AND cs.through_seq < $4")}
unsummarized AS (
    SELECT m.seq, m.message_id, m.role, m.content, m.tokens, m.context_tokens, m.created_at,
           m.model, m.parent_id, m.response_time_seconds, m.feedback, m.comment,
           sum(m.context_tokens) OVER (ORDER BY m.seq DESC) AS running_cost,
           count(*) OVER () AS unsummarized,
           row_number() OVER (ORDER BY m.seq DESC) AS position
    FROM messages m
    WHERE m.conversation_pk = (SELECT id FROM conversation)
      AND m.seq > COALESCE((SELECT through_seq FROM summary), 0) AND m.seq < $4
)
SELECT (SELECT id FROM conversation) AS conversation_pk, {_SUMMARY_COLUMNS},
       EXISTS (SELECT 1 FROM fact_versions v JOIN scopes s ON s.id = v.scope_id
               WHERE s.username = $1 AND s.graphname = $2
                 AND v.superseded_at IS NULL AND v.valid_to IS NULL) AS has_facts,
       u.*
FROM (SELECT 1) AS one
LEFT JOIN summary ON true
LEFT JOIN unsummarized u ON u.running_cost <= $5 OR u.position = 1
ORDER BY u.seq DESC
"""

# Like _CONTEXT_CANDIDATES, but oldest first and all of them, and only when their cost is over
# the room left beside the summary: the common "nothing to fold" answer carries no text.
_UNSUMMARIZED = f"""
{_conversation_and_summary()}
pending AS (
    SELECT m.seq, m.message_id, m.role, m.content, m.tokens, m.context_tokens, m.created_at,
           m.model, m.parent_id, m.response_time_seconds, m.feedback, m.comment,
           sum(m.context_tokens) OVER () AS cost
    FROM messages m
    WHERE m.conversation_pk = (SELECT id FROM conversation)
      AND m.seq > COALESCE((SELECT through_seq FROM summary), 0)
)
SELECT {_SUMMARY_COLUMNS},
       p.*
FROM (SELECT 1) AS one
LEFT JOIN summary ON true
LEFT JOIN pending p ON p.cost > $4 - COALESCE(summary.context_tokens, 0)
ORDER BY p.seq
"""

_CONVERSATION_INFO = """
SELECT c.id, c.conversation_id, c.name, c.created_at, c.updated_at,
       (SELECT count(*) FROM messages m WHERE m.conversation_pk = c.id) AS message_count
FROM conversations c JOIN scopes s ON s.id = c.scope_id
"""

_MAX_SEQ = 2**63 - 1
# Dictionary lookups: Enum(value) is measurably slow on the context's dozens of rows.
_ROLES = {role.value: role for role in Role}
_FEEDBACK = {feedback.value: feedback for feedback in Feedback}


def _message(row: asyncpg.Record) -> StoredMessage:
    return StoredMessage(
        seq=row["seq"],
        message_id=row["message_id"],
        conversation_id=row["conversation_id"],
        role=_ROLES[row["role"]],
        content=row["content"],
        tokens=row["tokens"],
        context_tokens=row["context_tokens"],
        created_at=row["created_at"],
        model=row["model"],
        parent_id=row["parent_id"],
        response_time_seconds=row["response_time_seconds"],
        feedback=_FEEDBACK[row["feedback"]],
        comment=row["comment"],
    )


def _conversation(row: asyncpg.Record) -> ConversationInfo:
    return ConversationInfo(
        conversation_id=row["conversation_id"],
        name=row["name"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        message_count=row["message_count"],
    )


def _summary(row: asyncpg.Record) -> Summary | None:
    """The summary columns of a _CONTEXT_CANDIDATES or _UNSUMMARIZED row."""
    if row["through_seq"] is None:
        return None
    return Summary(
        content=row["summary_content"],
        tokens=row["summary_tokens"],
        context_tokens=row["summary_context_tokens"],
        through_seq=row["through_seq"],
        through_message_id=row["through_message_id"],
    )


def _encode_cursor(*parts: str) -> str:
    return base64.urlsafe_b64encode("|".join(parts).encode()).decode().rstrip("=")


def _decode_cursor(cursor: str, arity: int) -> list[str]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        parts = base64.urlsafe_b64decode(padded.encode("ascii")).decode().split("|")
    except (ValueError, UnicodeError, binascii.Error) as exc:
        raise InvalidArgument("page_token", "not a token this service issued") from exc
    if len(parts) != arity:
        raise InvalidArgument("page_token", "not a token this service issued")
    return parts


def _cursor_number(text: str) -> int:
    """A sequence number or key from a cursor: ASCII digits within PostgreSQL's bigint."""
    if not (text.isascii() and text.isdigit()) or int(text) > _BIGINT_MAX:
        raise InvalidArgument("page_token", "not a token this service issued")
    return int(text)


def _cursor_time(text: str) -> datetime:
    try:
        stamp = datetime.fromisoformat(text)
    except ValueError:
        stamp = None
    if stamp is None or stamp.tzinfo is None:
        raise InvalidArgument("page_token", "not a token this service issued")
    return stamp


_BIGINT_MAX = 2**63 - 1
# A message's fields besides its text, encoded, at most (ids, model, timestamps, numbers).
_MESSAGE_OVERHEAD_BYTES = 2048


def _within_bytes(rows: list[asyncpg.Record], page_bytes: int | None) -> list[asyncpg.Record]:
    """The leading rows whose text fits in `page_bytes` (at least one): a page of long messages
    must stay under the largest response gRPC may send."""
    if page_bytes is None:
        return rows
    total = 0
    for i, row in enumerate(rows):
        total += len(row["content"].encode()) + len(row["comment"].encode())
        total += _MESSAGE_OVERHEAD_BYTES
        if total > page_bytes and i > 0:
            return rows[:i]
    return rows


class PostgresConversationStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

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
        async with self._pool.acquire(timeout=timeout_s) as conn:
            if len(messages) == 1:  # a turn: one statement is its own transaction
                return await self._append(
                    conn, scope, conversation_id, messages, conversation_name, create, timeout_s
                )
            async with conn.transaction():
                return await self._append(
                    conn, scope, conversation_id, messages, conversation_name, create, timeout_s
                )

    @staticmethod
    async def _append(
        conn: asyncpg.Connection,
        scope: Scope,
        conversation_id: str,
        messages: Sequence[NewMessage],
        conversation_name: str,
        create: bool,
        timeout_s: float | None,
    ) -> AppendOutcome:
        stored: list[StoredMessage] = []
        inserted = 0
        created = False
        for message in messages:
            try:
                row = await conn.fetchrow(
                    _APPEND,
                    scope.username,
                    scope.graphname,
                    scope.scope_hash,
                    conversation_id,
                    create,
                    conversation_name,
                    message.message_id,
                    message.role.value,
                    message.content,
                    message.tokens,
                    message.context_tokens,
                    message.model,
                    message.parent_id,
                    message.response_time_seconds,
                    int(message.feedback),
                    message.comment,
                    message.created_at,
                    timeout=timeout_s,
                )
            except asyncpg.PostgresError as exc:
                raise _append_error(exc, conversation_id, message) from exc
            assert row is not None
            created = created or row["out_conversation_created"]
            inserted += row["out_inserted"]
            stored.append(
                StoredMessage(
                    seq=row["out_seq"],
                    message_id=message.message_id,
                    conversation_id=conversation_id,
                    role=message.role,
                    content=message.content,
                    tokens=message.tokens,
                    context_tokens=message.context_tokens,
                    created_at=row["out_created_at"],
                    model=message.model,
                    parent_id=message.parent_id,
                    response_time_seconds=message.response_time_seconds,
                    feedback=message.feedback,
                    comment=message.comment,
                )
            )
        return AppendOutcome(created, stored, inserted)

    async def _conversation_pk(
        self,
        conn: asyncpg.Connection,
        scope: Scope,
        conversation_id: str,
        timeout_s: float | None,
    ) -> int | None:
        row = await conn.fetchrow(
            _FIND_CONVERSATION,
            scope.username,
            scope.graphname,
            conversation_id,
            timeout=timeout_s,
        )
        return None if row is None else int(row["id"])

    async def context_candidates(
        self,
        scope: Scope,
        conversation_id: str,
        before_seq: int | None,
        cost_budget: int,
        timeout_s: float | None,
    ) -> ContextCandidates:
        rows = await self._pool.fetch(
            _CONTEXT_CANDIDATES,
            scope.username,
            scope.graphname,
            conversation_id,
            before_seq if before_seq is not None else _MAX_SEQ,
            cost_budget,
            timeout=timeout_s,
        )
        first = rows[0]
        has_facts = bool(first["has_facts"])
        if first["conversation_pk"] is None:
            return ContextCandidates(False, None, [], 0, has_facts)
        summary = _summary(first)
        if first["seq"] is None:
            return ContextCandidates(True, summary, [], 0, has_facts)
        return ContextCandidates(
            True, summary, [_message(r) for r in rows], int(first["unsummarized"]), has_facts
        )

    async def unsummarized(
        self, scope: Scope, conversation_id: str, room_tokens: int, timeout_s: float | None
    ) -> tuple[Summary | None, list[StoredMessage]]:
        rows = await self._pool.fetch(
            _UNSUMMARIZED,
            scope.username,
            scope.graphname,
            conversation_id,
            room_tokens,
            timeout=timeout_s,
        )
        first = rows[0]
        summary = _summary(first)
        if first["seq"] is None:
            return summary, []
        return summary, [_message(r) for r in rows]

    async def user_message_before(
        self,
        scope: Scope,
        conversation_id: str,
        reply_seq: int,
        parent_id: str,
        timeout_s: float | None,
    ) -> StoredMessage | None:
        row = await self._pool.fetchrow(
            f"""SELECT {_MESSAGE_COLUMNS} FROM messages m
                JOIN conversations c ON c.id = m.conversation_pk
                JOIN scopes s ON s.id = c.scope_id
                WHERE s.username = $1 AND s.graphname = $2 AND c.conversation_id = $3
                  AND m.seq < $4 AND m.role = 'user'
                  AND ($5 = '' OR m.message_id = $5)
                ORDER BY m.seq DESC LIMIT 1""",
            scope.username,
            scope.graphname,
            conversation_id,
            reply_seq,
            parent_id,
            timeout=timeout_s,
        )
        return None if row is None else _message(row)

    async def save_summary(
        self,
        scope: Scope,
        conversation_id: str,
        summary: Summary,
        summarizer: str,
        timeout_s: float | None,
    ) -> bool:
        async with self._pool.acquire(timeout=timeout_s) as conn, conn.transaction():
            # Under the lock the watermark check below sees every summary stored before, so
            # two servers compacting one conversation never store two for one stretch.
            await lock_scope(conn, scope, timeout_s)
            conversation_pk = await self._conversation_pk(conn, scope, conversation_id, timeout_s)
            if conversation_pk is None:
                return False
            status = await conn.execute(
                """
                INSERT INTO conversation_summaries
                    (conversation_pk, content, tokens, context_tokens, through_seq, summarizer)
                SELECT $1, $2, $3, $4, $5, $6
                WHERE $5 > COALESCE((SELECT max(through_seq) FROM conversation_summaries
                                     WHERE conversation_pk = $1), 0)
                ON CONFLICT DO NOTHING
                """,
                conversation_pk,
                summary.content,
                summary.tokens,
                summary.context_tokens,
                summary.through_seq,
                summarizer,
                timeout=timeout_s,
            )
        return bool(status == "INSERT 0 1")

    async def list_conversations(
        self, scope: Scope, page_size: int, cursor: str, timeout_s: float | None
    ) -> Page[ConversationInfo]:
        after_time: datetime | None = None
        after_id = 0
        if cursor:
            stamp, pk = _decode_cursor(cursor, 2)
            after_time, after_id = _cursor_time(stamp), _cursor_number(pk)
        rows = await self._pool.fetch(
            _CONVERSATION_INFO
            + """
            WHERE s.username = $1 AND s.graphname = $2
              AND ($3::timestamptz IS NULL OR (c.updated_at, c.id) < ($3, $4))
            ORDER BY c.updated_at DESC, c.id DESC
            LIMIT $5
            """,
            scope.username,
            scope.graphname,
            after_time,
            after_id,
            page_size + 1,
            timeout=timeout_s,
        )
        next_cursor = ""
        if len(rows) > page_size:
            rows = rows[:page_size]
            last = rows[-1]
            next_cursor = _encode_cursor(last["updated_at"].isoformat(), str(last["id"]))
        return Page([_conversation(r) for r in rows], next_cursor)

    async def get_conversation(
        self,
        scope: Scope,
        conversation_id: str,
        page_size: int,
        cursor: str,
        timeout_s: float | None,
        page_bytes: int | None = None,
    ) -> tuple[ConversationInfo, Page[StoredMessage]]:
        after_seq = 0
        if cursor:
            (raw,) = _decode_cursor(cursor, 1)
            after_seq = _cursor_number(raw)
        async with self._pool.acquire(timeout=timeout_s) as conn:
            info = await conn.fetchrow(
                _CONVERSATION_INFO
                + " WHERE s.username = $1 AND s.graphname = $2 AND c.conversation_id = $3",
                scope.username,
                scope.graphname,
                conversation_id,
                timeout=timeout_s,
            )
            if info is None:
                raise NotFound(f"conversation_id: no conversation {conversation_id!r}")
            rows = await conn.fetch(
                f"SELECT {_MESSAGE_COLUMNS} FROM messages m "
                "JOIN conversations c ON c.id = m.conversation_pk "
                "WHERE m.conversation_pk = $1 AND m.seq > $2 ORDER BY m.seq LIMIT $3",
                info["id"],
                after_seq,
                page_size + 1,
                timeout=timeout_s,
            )
        kept = _within_bytes(rows[:page_size], page_bytes)
        next_cursor = _encode_cursor(str(kept[-1]["seq"])) if len(rows) > len(kept) else ""
        return _conversation(info), Page([_message(r) for r in kept], next_cursor)

    async def set_feedback(
        self,
        scope: Scope,
        message_id: str,
        feedback: Feedback,
        comment: str,
        timeout_s: float | None,
    ) -> StoredMessage:
        row = await self._pool.fetchrow(
            f"""
            WITH updated AS (
                UPDATE messages m SET feedback = $4, comment = $5, feedback_at = now()
                FROM scopes s
                WHERE m.scope_id = s.id AND s.username = $1 AND s.graphname = $2
                  AND m.message_id = $3
                RETURNING m.*
            )
            SELECT {_MESSAGE_COLUMNS}
            FROM updated m JOIN conversations c ON c.id = m.conversation_pk
            """,
            scope.username,
            scope.graphname,
            message_id,
            int(feedback),
            comment,
            timeout=timeout_s,
        )
        if row is None:
            raise NotFound(f"message_id: no message {message_id!r}")
        return _message(row)

    async def rename_conversation(
        self, scope: Scope, conversation_id: str, name: str, timeout_s: float | None
    ) -> ConversationInfo:
        row = await self._pool.fetchrow(
            """
            WITH renamed AS (
                UPDATE conversations c SET name = $4
                FROM scopes s
                WHERE c.scope_id = s.id AND s.username = $1 AND s.graphname = $2
                  AND c.conversation_id = $3
                RETURNING c.*
            )
            SELECT c.id, c.conversation_id, c.name, c.created_at, c.updated_at,
                   (SELECT count(*) FROM messages m WHERE m.conversation_pk = c.id)
                       AS message_count
            FROM renamed c
            """,
            scope.username,
            scope.graphname,
            conversation_id,
            name,
            timeout=timeout_s,
        )
        if row is None:
            raise NotFound(f"conversation_id: no conversation {conversation_id!r}")
        return _conversation(row)

    async def delete_conversation(
        self, scope: Scope, conversation_id: str, timeout_s: float | None
    ) -> int:
        async with self._pool.acquire(timeout=timeout_s) as conn, conn.transaction():
            # An append on another server is then wholly before (and deleted) or wholly after
            # (a new conversation), never a message referencing a conversation gone meanwhile.
            await lock_scope(conn, scope, timeout_s)
            row = await conn.fetchrow(
                """
                WITH target AS (
                    SELECT c.id FROM conversations c JOIN scopes s ON s.id = c.scope_id
                    WHERE s.username = $1 AND s.graphname = $2 AND c.conversation_id = $3
                ),
                deleted AS (
                    DELETE FROM conversations WHERE id IN (SELECT id FROM target) RETURNING id
                )
                SELECT (SELECT count(*) FROM deleted) AS conversations,
                       (SELECT count(*) FROM messages
                        WHERE conversation_pk IN (SELECT id FROM target)) AS messages
                """,
                scope.username,
                scope.graphname,
                conversation_id,
                timeout=timeout_s,
            )
        if row is None or row["conversations"] == 0:
            raise NotFound(f"conversation_id: no conversation {conversation_id!r}")
        return int(row["messages"])


def _append_error(exc: Exception, conversation_id: str, message: NewMessage) -> Exception:
    state = getattr(exc, "sqlstate", "")
    if state == _NO_CONVERSATION:
        return NotFound(f"conversation_id: no conversation {conversation_id!r}")
    if state == _NO_PARENT:
        return NotFound(f"parent_id: no message {message.parent_id!r} in this conversation")
    if state == _ID_TAKEN:
        return AlreadyExists(
            f"message_id: {message.message_id!r} is already used by a different message"
        )
    return exc
