"""Storing messages, one round trip each through memory_append_message (migrations 0001, 0003),
and finding the user message a reply answers."""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from memory_server.memory.conversation.model import AppendOutcome, NewMessage, StoredMessage
from memory_server.memory.errors import AlreadyExists, NotFound
from memory_server.memory.identity import Scope
from memory_server.store.conversations._sql import MESSAGE_COLUMNS, no_conversation, read_message

_APPEND = """
SELECT out_seq, out_created_at, out_inserted, out_conversation_created
FROM memory_append_message($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15,
                           $16, $17)
"""

# memory_append_message's own SQLSTATEs (migrations/0001_conversations.sql).
_NO_CONVERSATION, _NO_PARENT, _ID_TAKEN = "GMNF1", "GMNF2", "GMAE1"


class ConversationMessages:
    _pool: asyncpg.Pool

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

    async def user_message_before(
        self,
        scope: Scope,
        conversation_id: str,
        reply_seq: int,
        parent_id: str,
        timeout_s: float | None,
    ) -> StoredMessage | None:
        row = await self._pool.fetchrow(
            f"""SELECT {MESSAGE_COLUMNS} FROM messages m
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
        return None if row is None else read_message(row)


def _append_error(exc: Exception, conversation_id: str, message: NewMessage) -> Exception:
    state = getattr(exc, "sqlstate", "")
    if state == _NO_CONVERSATION:
        return no_conversation(conversation_id)
    if state == _NO_PARENT:
        return NotFound(f"parent_id: no message {message.parent_id!r} in this conversation")
    if state == _ID_TAKEN:
        return AlreadyExists(
            f"message_id: {message.message_id!r} is already used by a different message"
        )
    return exc
