"""The short-term memory's reads and writes: a turn's context candidates (the summary and the
newest unsummarized messages that fit), what is left to fold, and storing a folded summary."""

from __future__ import annotations

import asyncpg

from memory_server.memory.conversation.model import ContextCandidates, StoredMessage, Summary
from memory_server.memory.identity import Scope
from memory_server.store.conversations._sql import BIGINT_MAX, FIND_CONVERSATION, read_message
from memory_server.store.scope_lock import lock_scope


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
       -- Whether messages out of this turn's window may be recalled as episodes: another
       -- conversation of the scope, or turns of this one already folded into its summary.
       (EXISTS (SELECT 1 FROM conversations c2 JOIN scopes s ON s.id = c2.scope_id
                WHERE s.username = $1 AND s.graphname = $2
                  AND c2.id IS DISTINCT FROM (SELECT id FROM conversation))
        OR (SELECT through_seq FROM summary) IS NOT NULL) AS has_episodes,
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


class ConversationSummaries:
    _pool: asyncpg.Pool

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
            before_seq if before_seq is not None else BIGINT_MAX,
            cost_budget,
            timeout=timeout_s,
        )
        first = rows[0]
        has = {"has_facts": bool(first["has_facts"]), "has_episodes": bool(first["has_episodes"])}
        if first["conversation_pk"] is None:
            return ContextCandidates(False, None, [], 0, **has)
        summary = _summary(first)
        if first["seq"] is None:
            return ContextCandidates(True, summary, [], 0, **has)
        return ContextCandidates(
            True, summary, [read_message(r) for r in rows], int(first["unsummarized"]), **has
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
        return summary, [read_message(r) for r in rows]

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
            found = await conn.fetchrow(
                FIND_CONVERSATION,
                scope.username,
                scope.graphname,
                conversation_id,
                timeout=timeout_s,
            )
            if found is None:
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
                found["id"],
                summary.content,
                summary.tokens,
                summary.context_tokens,
                summary.through_seq,
                summarizer,
                timeout=timeout_s,
            )
        return bool(status == "INSERT 0 1")
