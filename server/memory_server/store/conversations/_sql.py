"""What the conversation statements share: the message and conversation columns, reading them
back, and the one-row-or-NotFound lookup in the caller's scope."""

from __future__ import annotations

import asyncpg

from memory_server.memory.conversation.model import ConversationInfo, Feedback, Role, StoredMessage
from memory_server.memory.errors import NotFound
from memory_server.memory.identity import Scope
from memory_server.store.rows import row_reader

# The largest seq, key or bound PostgreSQL's bigint holds.
BIGINT_MAX = 2**63 - 1

MESSAGE_COLUMNS = """m.seq, m.message_id, c.conversation_id, m.role, m.content, m.tokens,
    m.context_tokens, m.created_at, m.model, m.parent_id, m.response_time_seconds, m.feedback,
    m.comment"""

# The caller's conversation: $1 username, $2 graphname, $3 conversation_id.
FIND_CONVERSATION = """
SELECT c.id FROM conversations c JOIN scopes s ON s.id = c.scope_id
WHERE s.username = $1 AND s.graphname = $2 AND c.conversation_id = $3
"""

# Of a conversation `c`.
CONVERSATION_COLUMNS = """c.id, c.conversation_id, c.name, c.created_at, c.updated_at,
       (SELECT count(*) FROM messages m WHERE m.conversation_pk = c.id) AS message_count"""

# Dictionary lookups: Enum(value) is measurably slow on the context's dozens of rows.
_ROLES = {role.value: role for role in Role}
_FEEDBACK = {feedback.value: feedback for feedback in Feedback}

read_message = row_reader(StoredMessage, role=_ROLES.__getitem__, feedback=_FEEDBACK.__getitem__)
"""A StoredMessage from a row of MESSAGE_COLUMNS (or of the same names)."""

read_conversation = row_reader(ConversationInfo)
"""A ConversationInfo from a row of CONVERSATION_COLUMNS."""


def no_conversation(conversation_id: str) -> NotFound:
    return NotFound(f"conversation_id: no conversation {conversation_id!r}")


async def fetch_in_scope(
    db: asyncpg.Pool | asyncpg.Connection,
    sql: str,
    scope: Scope,
    *args: object,
    timeout_s: float | None,
    missing: NotFound,
) -> asyncpg.Record:
    """The row `sql` answers, with $1 and $2 the scope's username and graphname and `args`
    after them; `missing` is raised when there is none (an id of another scope included)."""
    row = await db.fetchrow(sql, scope.username, scope.graphname, *args, timeout=timeout_s)
    if row is None:
        raise missing
    return row
