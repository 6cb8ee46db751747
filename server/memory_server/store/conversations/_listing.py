"""The conversations as the UI sees them: the list of a scope's conversations and the pages of
one, each behind an opaque page token; renaming, feedback on a message, deleting."""

from __future__ import annotations

import base64
import binascii
from datetime import datetime

import asyncpg

from memory_server.memory.conversation.model import (
    ConversationInfo,
    Feedback,
    FeedbackEntry,
    Page,
    PageRequest,
    StoredMessage,
)
from memory_server.memory.errors import InvalidArgument, NotFound
from memory_server.memory.identity import Scope
from memory_server.store.conversations._sql import (
    BIGINT_MAX,
    CONVERSATION_COLUMNS,
    FIND_CONVERSATION,
    MESSAGE_COLUMNS,
    fetch_in_scope,
    no_conversation,
    read_conversation,
    read_message,
)
from memory_server.store.scope_lock import lock_scope

_CONVERSATION_INFO = f"""
SELECT {CONVERSATION_COLUMNS}
FROM conversations c JOIN scopes s ON s.id = c.scope_id
"""

# A message's fields besides its text, encoded, at most (ids, model, timestamps, numbers).
_MESSAGE_OVERHEAD_BYTES = 2048


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
    if not (text.isascii() and text.isdigit()) or int(text) > BIGINT_MAX:
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


def _after_seq(page: PageRequest) -> int:
    """The seq a page of messages starts after: its cursor's, 0 for the first page."""
    if not page.cursor:
        return 0
    (raw,) = _decode_cursor(page.cursor, 1)
    return _cursor_number(raw)


def _seq_page(rows: list[asyncpg.Record], page: PageRequest) -> tuple[list[asyncpg.Record], str]:
    """Of `page.size + 1` rows read in seq order, the page's (the leading ones whose text fits
    in `page.max_bytes`, at least one: a page of long messages must stay under the largest
    response gRPC may send) and the cursor of the next page ("" when there is none)."""
    kept = rows[: page.size]
    if page.max_bytes is not None:
        total = 0
        for i, row in enumerate(kept):
            total += len(row["content"].encode()) + len(row["comment"].encode())
            total += _MESSAGE_OVERHEAD_BYTES
            if total > page.max_bytes and i > 0:
                kept = kept[:i]
                break
    next_cursor = _encode_cursor(str(kept[-1]["seq"])) if len(rows) > len(kept) else ""
    return kept, next_cursor


class ConversationListing:
    _pool: asyncpg.Pool

    async def list_conversations(
        self, scope: Scope, page: PageRequest, timeout_s: float | None
    ) -> Page[ConversationInfo]:
        after_time: datetime | None = None
        after_id = 0
        if page.cursor:
            stamp, pk = _decode_cursor(page.cursor, 2)
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
            page.size + 1,
            timeout=timeout_s,
        )
        next_cursor = ""
        if len(rows) > page.size:
            rows = rows[: page.size]
            last = rows[-1]
            next_cursor = _encode_cursor(last["updated_at"].isoformat(), str(last["id"]))
        return Page([read_conversation(r) for r in rows], next_cursor)

    async def get_conversation(
        self, scope: Scope, conversation_id: str, page: PageRequest, timeout_s: float | None
    ) -> tuple[ConversationInfo, Page[StoredMessage]]:
        after_seq = _after_seq(page)
        async with self._pool.acquire(timeout=timeout_s) as conn:
            info = await fetch_in_scope(
                conn,
                _CONVERSATION_INFO
                + " WHERE s.username = $1 AND s.graphname = $2 AND c.conversation_id = $3",
                scope,
                conversation_id,
                timeout_s=timeout_s,
                missing=no_conversation(conversation_id),
            )
            rows = await conn.fetch(
                f"SELECT {MESSAGE_COLUMNS} FROM messages m "
                "JOIN conversations c ON c.id = m.conversation_pk "
                "WHERE m.conversation_pk = $1 AND m.seq > $2 ORDER BY m.seq LIMIT $3",
                info["id"],
                after_seq,
                page.size + 1,
                timeout=timeout_s,
            )
        kept, next_cursor = _seq_page(rows, page)
        return read_conversation(info), Page([read_message(r) for r in kept], next_cursor)

    async def list_feedback(
        self, graphname: str, rated_only: bool, page: PageRequest, timeout_s: float | None
    ) -> Page[FeedbackEntry]:
        """Every user's messages on the graph in insertion order (the admin export); with
        `rated_only`, those with feedback or a comment. Not confined to one scope: the caller
        decides who may see it."""
        rows = await self._pool.fetch(
            f"""
            SELECT {MESSAGE_COLUMNS}, s.username, m.feedback_at
            FROM scopes s
            JOIN messages m ON m.scope_id = s.id
            JOIN conversations c ON c.id = m.conversation_pk
            WHERE s.graphname = $1 AND m.seq > $2
              AND (NOT $3 OR m.feedback <> 0 OR m.comment <> '')
            ORDER BY m.seq
            LIMIT $4
            """,
            graphname,
            _after_seq(page),
            rated_only,
            page.size + 1,
            timeout=timeout_s,
        )
        kept, next_cursor = _seq_page(rows, page)
        entries = [FeedbackEntry(r["username"], read_message(r), r["feedback_at"]) for r in kept]
        return Page(entries, next_cursor)

    async def set_feedback(
        self,
        scope: Scope,
        message_id: str,
        feedback: Feedback,
        comment: str,
        timeout_s: float | None,
    ) -> StoredMessage:
        row = await fetch_in_scope(
            self._pool,
            f"""
            WITH updated AS (
                UPDATE messages m SET feedback = $4, comment = $5, feedback_at = now()
                FROM scopes s
                WHERE m.scope_id = s.id AND s.username = $1 AND s.graphname = $2
                  AND m.message_id = $3
                RETURNING m.*
            )
            SELECT {MESSAGE_COLUMNS}
            FROM updated m JOIN conversations c ON c.id = m.conversation_pk
            """,
            scope,
            message_id,
            int(feedback),
            comment,
            timeout_s=timeout_s,
            missing=NotFound(f"message_id: no message {message_id!r}"),
        )
        return read_message(row)

    async def rename_conversation(
        self, scope: Scope, conversation_id: str, name: str, timeout_s: float | None
    ) -> ConversationInfo:
        row = await fetch_in_scope(
            self._pool,
            f"""
            WITH renamed AS (
                UPDATE conversations c SET name = $4
                FROM scopes s
                WHERE c.scope_id = s.id AND s.username = $1 AND s.graphname = $2
                  AND c.conversation_id = $3
                RETURNING c.*
            )
            SELECT {CONVERSATION_COLUMNS}
            FROM renamed c
            """,
            scope,
            conversation_id,
            name,
            timeout_s=timeout_s,
            missing=no_conversation(conversation_id),
        )
        return read_conversation(row)

    async def delete_conversation(
        self, scope: Scope, conversation_id: str, timeout_s: float | None
    ) -> int:
        async with self._pool.acquire(timeout=timeout_s) as conn, conn.transaction():
            # An append on another server is then wholly before (and deleted) or wholly after
            # (a new conversation), never a message referencing a conversation gone meanwhile.
            await lock_scope(conn, scope, timeout_s)
            row = await conn.fetchrow(
                f"""
                WITH target AS ({FIND_CONVERSATION}),
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
            raise no_conversation(conversation_id)
        return int(row["messages"])
