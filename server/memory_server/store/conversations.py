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

_UPSERT_SCOPE = """
WITH inserted AS (
    INSERT INTO scopes (username, graphname, scope_hash) VALUES ($1, $2, $3)
    ON CONFLICT DO NOTHING RETURNING id
)
SELECT id FROM inserted
UNION ALL
SELECT id FROM scopes WHERE username = $1 AND graphname = $2
LIMIT 1
"""

_UPSERT_CONVERSATION = """
WITH inserted AS (
    INSERT INTO conversations (scope_id, conversation_id, name) VALUES ($1, $2, $3)
    ON CONFLICT DO NOTHING RETURNING id
)
SELECT id, true AS created FROM inserted
UNION ALL
SELECT id, false FROM conversations WHERE scope_id = $1 AND conversation_id = $2
LIMIT 1
"""

_FIND_CONVERSATION = """
SELECT c.id, c.scope_id FROM conversations c JOIN scopes s ON s.id = c.scope_id
WHERE s.username = $1 AND s.graphname = $2 AND c.conversation_id = $3
"""

_INSERT_MESSAGE = """
INSERT INTO messages (scope_id, conversation_pk, message_id, role, content, tokens, model,
                      parent_id, response_time_seconds, feedback, comment, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, COALESCE($12, now()))
ON CONFLICT (scope_id, message_id) DO NOTHING
RETURNING seq, created_at
"""

_MESSAGE_COLUMNS = """m.seq, m.message_id, c.conversation_id, m.role, m.content, m.tokens,
    m.created_at, m.model, m.parent_id, m.response_time_seconds, m.feedback, m.comment"""

_LATEST_SUMMARY = """
SELECT cs.content, cs.tokens, cs.through_seq, m.message_id AS through_message_id
FROM conversation_summaries cs JOIN messages m ON m.seq = cs.through_seq
WHERE cs.conversation_pk = $1
ORDER BY cs.through_seq DESC LIMIT 1
"""

# Newest unsummarized messages first, with the running cost; rows past the budget are cut in
# the database. The first row always comes back so the total count is known.
_CONTEXT_CANDIDATES = f"""
SELECT * FROM (
    SELECT {_MESSAGE_COLUMNS},
           sum(m.tokens + $4) OVER (ORDER BY m.seq DESC) AS running_cost,
           count(*) OVER () AS unsummarized,
           row_number() OVER (ORDER BY m.seq DESC) AS position
    FROM messages m JOIN conversations c ON c.id = m.conversation_pk
    WHERE m.conversation_pk = $1 AND m.seq > $2 AND m.seq < $3
) t
WHERE running_cost <= $5 OR position = 1
ORDER BY seq DESC
"""

_UNSUMMARIZED = f"""
SELECT {_MESSAGE_COLUMNS}
FROM messages m JOIN conversations c ON c.id = m.conversation_pk
WHERE m.conversation_pk = $1 AND m.seq > $2
ORDER BY m.seq
"""

_CONVERSATION_INFO = """
SELECT c.id, c.conversation_id, c.name, c.created_at, c.updated_at,
       (SELECT count(*) FROM messages m WHERE m.conversation_pk = c.id) AS message_count
FROM conversations c JOIN scopes s ON s.id = c.scope_id
"""

_MAX_SEQ = 2**63 - 1


def _message(row: asyncpg.Record) -> StoredMessage:
    return StoredMessage(
        seq=row["seq"],
        message_id=row["message_id"],
        conversation_id=row["conversation_id"],
        role=Role(row["role"]),
        content=row["content"],
        tokens=row["tokens"],
        created_at=row["created_at"],
        model=row["model"],
        parent_id=row["parent_id"],
        response_time_seconds=row["response_time_seconds"],
        feedback=Feedback(row["feedback"]),
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


def _summary(row: asyncpg.Record | None) -> Summary | None:
    if row is None:
        return None
    return Summary(row["content"], row["tokens"], row["through_seq"], row["through_message_id"])


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
        async with self._pool.acquire(timeout=timeout_s) as conn, conn.transaction():
            if create:
                scope_id = await conn.fetchval(
                    _UPSERT_SCOPE,
                    scope.username,
                    scope.graphname,
                    scope.scope_hash,
                    timeout=timeout_s,
                )
                row = await conn.fetchrow(
                    _UPSERT_CONVERSATION,
                    scope_id,
                    conversation_id,
                    conversation_name,
                    timeout=timeout_s,
                )
                conversation_pk, created = row["id"], row["created"]
            else:
                row = await conn.fetchrow(
                    _FIND_CONVERSATION,
                    scope.username,
                    scope.graphname,
                    conversation_id,
                    timeout=timeout_s,
                )
                if row is None:
                    raise NotFound(f"conversation_id: no conversation {conversation_id!r}")
                conversation_pk, scope_id, created = row["id"], row["scope_id"], False
            await self._check_parents(conn, conversation_pk, messages, timeout_s)
            stored: list[StoredMessage] = []
            inserted = 0
            for message in messages:
                row = await conn.fetchrow(
                    _INSERT_MESSAGE,
                    scope_id,
                    conversation_pk,
                    message.message_id,
                    message.role.value,
                    message.content,
                    message.tokens,
                    message.model,
                    message.parent_id,
                    message.response_time_seconds,
                    int(message.feedback),
                    message.comment,
                    message.created_at,
                    timeout=timeout_s,
                )
                if row is None:
                    stored.append(
                        await self._existing(conn, scope_id, conversation_pk, message, timeout_s)
                    )
                    continue
                inserted += 1
                stored.append(
                    StoredMessage(
                        seq=row["seq"],
                        message_id=message.message_id,
                        conversation_id=conversation_id,
                        role=message.role,
                        content=message.content,
                        tokens=message.tokens,
                        created_at=row["created_at"],
                        model=message.model,
                        parent_id=message.parent_id,
                        response_time_seconds=message.response_time_seconds,
                        feedback=message.feedback,
                        comment=message.comment,
                    )
                )
            if inserted:
                await conn.execute(
                    "UPDATE conversations SET updated_at = now() WHERE id = $1",
                    conversation_pk,
                    timeout=timeout_s,
                )
        return AppendOutcome(created, stored, inserted)

    @staticmethod
    async def _check_parents(
        conn: asyncpg.Connection,
        conversation_pk: int,
        messages: Sequence[NewMessage],
        timeout_s: float | None,
    ) -> None:
        in_batch = {m.message_id for m in messages}
        wanted = sorted({m.parent_id for m in messages if m.parent_id} - in_batch)
        if not wanted:
            return
        rows = await conn.fetch(
            "SELECT message_id FROM messages WHERE conversation_pk = $1 "
            "AND message_id = ANY($2::text[])",
            conversation_pk,
            wanted,
            timeout=timeout_s,
        )
        missing = set(wanted) - {r["message_id"] for r in rows}
        if missing:
            raise NotFound(f"parent_id: no message {sorted(missing)[0]!r} in this conversation")

    @staticmethod
    async def _existing(
        conn: asyncpg.Connection,
        scope_id: int,
        conversation_pk: int,
        message: NewMessage,
        timeout_s: float | None,
    ) -> StoredMessage:
        row = await conn.fetchrow(
            f"SELECT {_MESSAGE_COLUMNS}, m.conversation_pk FROM messages m "
            "JOIN conversations c ON c.id = m.conversation_pk "
            "WHERE m.scope_id = $1 AND m.message_id = $2",
            scope_id,
            message.message_id,
            timeout=timeout_s,
        )
        if (
            row is None
            or row["conversation_pk"] != conversation_pk
            or row["role"] != message.role.value
            or row["content"] != message.content
        ):
            raise AlreadyExists(
                f"message_id: {message.message_id!r} is already used by a different message"
            )
        return _message(row)

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
        line_overhead: int,
        timeout_s: float | None,
    ) -> ContextCandidates:
        async with self._pool.acquire(timeout=timeout_s) as conn:
            conversation_pk = await self._conversation_pk(conn, scope, conversation_id, timeout_s)
            if conversation_pk is None:
                return ContextCandidates(False, None, [], 0)
            # Summary first, then the messages after its watermark: a compaction landing in
            # between only makes the summary slightly older, never loses a message.
            summary = _summary(
                await conn.fetchrow(_LATEST_SUMMARY, conversation_pk, timeout=timeout_s)
            )
            rows = await conn.fetch(
                _CONTEXT_CANDIDATES,
                conversation_pk,
                summary.through_seq if summary else 0,
                before_seq if before_seq is not None else _MAX_SEQ,
                line_overhead,
                cost_budget,
                timeout=timeout_s,
            )
        total = int(rows[0]["unsummarized"]) if rows else 0
        return ContextCandidates(True, summary, [_message(r) for r in rows], total)

    async def unsummarized(
        self, scope: Scope, conversation_id: str, timeout_s: float | None
    ) -> tuple[Summary | None, list[StoredMessage]]:
        async with self._pool.acquire(timeout=timeout_s) as conn:
            conversation_pk = await self._conversation_pk(conn, scope, conversation_id, timeout_s)
            if conversation_pk is None:
                return None, []  # deleted meanwhile: nothing to fold
            summary = _summary(
                await conn.fetchrow(_LATEST_SUMMARY, conversation_pk, timeout=timeout_s)
            )
            rows = await conn.fetch(
                _UNSUMMARIZED,
                conversation_pk,
                summary.through_seq if summary else 0,
                timeout=timeout_s,
            )
        return summary, [_message(r) for r in rows]

    async def save_summary(
        self,
        scope: Scope,
        conversation_id: str,
        content: str,
        tokens: int,
        through_seq: int,
        summarizer: str,
        timeout_s: float | None,
    ) -> bool:
        async with self._pool.acquire(timeout=timeout_s) as conn:
            conversation_pk = await self._conversation_pk(conn, scope, conversation_id, timeout_s)
            if conversation_pk is None:
                return False
            status = await conn.execute(
                """
                INSERT INTO conversation_summaries
                    (conversation_pk, content, tokens, through_seq, summarizer)
                SELECT $1, $2, $3, $4, $5
                WHERE $4 > COALESCE((SELECT max(through_seq) FROM conversation_summaries
                                     WHERE conversation_pk = $1), 0)
                ON CONFLICT DO NOTHING
                """,
                conversation_pk,
                content,
                tokens,
                through_seq,
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
            try:
                after_time, after_id = datetime.fromisoformat(stamp), int(pk)
            except ValueError as exc:
                raise InvalidArgument("page_token", "not a token this service issued") from exc
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
    ) -> tuple[ConversationInfo, Page[StoredMessage]]:
        after_seq = 0
        if cursor:
            (raw,) = _decode_cursor(cursor, 1)
            if not raw.isdigit():
                raise InvalidArgument("page_token", "not a token this service issued")
            after_seq = int(raw)
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
        next_cursor = ""
        if len(rows) > page_size:
            rows = rows[:page_size]
            next_cursor = _encode_cursor(str(rows[-1]["seq"]))
        return _conversation(info), Page([_message(r) for r in rows], next_cursor)

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
        row = await self._pool.fetchrow(
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
