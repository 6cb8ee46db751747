"""Episodes (migration 0010): a scope's messages as long-term memory. Their lexical matches
and the messages themselves for episode search, and retention, which stops recalling messages
past `ltm_retention_days` (their rows stay in the conversation's history)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import asyncpg

from memory_server.memory.identity import Scope
from memory_server.memory.ports import AsOf, Episodes
from memory_server.store.conversations._sql import MESSAGE_COLUMNS, read_message
from memory_server.store.lexical import idf_coverage

# A message is an episode believed at the as-of point ($v valid time, $t transaction time;
# NULL: now) once it was said and stored: valid from its created_at, recorded from its
# recorded_at (migration 0010), and never closed (erasure removes it instead).
_EPISODE = """{m}.recallable AND {m}.role IN ('user', 'assistant')
    AND {m}.recorded_at <= COALESCE({t}, now()) AND {m}.created_at <= COALESCE({v}, now())"""
_SCOPE_ID = "(SELECT id FROM scopes WHERE username = $1 AND graphname = $2)"
_LEXICAL_EPISODE = _EPISODE.format(m="v", v="$5::timestamptz", t="$6::timestamptz")
# The lexical signal reads a scope's newest EPISODE_LEXICAL_WINDOW messages (by the index of
# migration 0011); older ones are found by their vectors. Its cost grows with the messages it
# reads, and a turn pays it: 1.8 ms at 500 messages, 5.8 ms at 1,500, 10.4 ms at 6,000 when
# every message shares the question's words (this machine, idle). LoCoMo's longest dev
# conversation has 680 turns, so the window changes nothing there.
EPISODE_LEXICAL_WINDOW = 1000
_WINDOW = f"""v.seq >= (SELECT COALESCE(min(r.seq), 0) FROM (
    SELECT seq FROM messages WHERE scope_id = {_SCOPE_ID}
    ORDER BY seq DESC LIMIT {EPISODE_LEXICAL_WINDOW}) r)"""

# The lexical signal, as for fact versions (store.lexical): the idf-weighted share of the
# question's words a message holds, over the scope's episodes believed at the as-of point.
EPISODE_LEXICAL = idf_coverage(
    table="messages",
    key="v.seq",
    newest="v.seq",
    scoped=f"v.scope_id = {_SCOPE_ID} AND {_WINDOW} AND {_LEXICAL_EPISODE}",
)

# Retention: at most $2 recallable messages older than $1 stop being episodes, and their
# vectors leave the index (one delete row each, in the same statement).
_EXPIRE = """
WITH old AS (
    SELECT seq FROM messages WHERE recallable AND created_at < $1 ORDER BY created_at LIMIT $2
),
expired AS (
    UPDATE messages m SET recallable = false FROM old WHERE m.seq = old.seq
    RETURNING m.seq, m.scope_id, m.role
),
queued AS (
    INSERT INTO vector_outbox (scope_hash, op, version_id, kind)
    SELECT s.scope_hash, 'delete', memory_episode_id(e.seq), 'episode'
    FROM expired e JOIN scopes s ON s.id = e.scope_id
    WHERE e.role IN ('user', 'assistant')
    RETURNING 1
)
SELECT (SELECT count(*) FROM expired) AS expired, (SELECT count(*) FROM queued) AS queued
"""


class ConversationEpisodes:
    _pool: asyncpg.Pool

    async def episode_lexical(
        self, scope: Scope, query: str, k: int, as_of: AsOf, *, timeout_s: float | None = None
    ) -> list[tuple[int, float]]:
        """(seq, coverage) of the scope's episodes sharing words with the query, best first."""
        rows = await self._pool.fetch(
            EPISODE_LEXICAL,
            scope.username,
            scope.graphname,
            query,
            k,
            as_of.valid_time,
            as_of.transaction_time,
            timeout=timeout_s,
        )
        return [(int(r["id"]), float(r["coverage"])) for r in rows]

    async def episodes(
        self,
        scope: Scope,
        seqs: Sequence[int],
        as_of: AsOf,
        *,
        around: Sequence[int] = (),
        timeout_s: float | None = None,
    ) -> Episodes:
        """The given messages that are episodes of the scope believed at `as_of`, and for each
        of `around` (believed too), the episodes said just before and just after it in its
        conversation; one statement."""
        if not seqs and not around:
            return Episodes([], {})
        believed = _EPISODE.format(m="m", v="$4::timestamptz", t="$5::timestamptz")
        near = _EPISODE.format(m="n", v="$4::timestamptz", t="$5::timestamptz")
        rows = await self._pool.fetch(
            f"""SELECT NULL::bigint AS seed, {MESSAGE_COLUMNS} FROM messages m
                JOIN conversations c ON c.id = m.conversation_pk
                WHERE m.scope_id = {_SCOPE_ID} AND m.seq = ANY($3::bigint[]) AND {believed}
                UNION ALL
                SELECT s.seed, {MESSAGE_COLUMNS.replace("m.", "n.")}
                FROM unnest($6::bigint[]) AS s(seed)
                JOIN messages m ON m.seq = s.seed AND m.scope_id = {_SCOPE_ID} AND {believed}
                JOIN conversations c ON c.id = m.conversation_pk
                CROSS JOIN LATERAL (
                    (SELECT n.* FROM messages n
                     WHERE n.conversation_pk = m.conversation_pk AND n.seq < m.seq AND {near}
                     ORDER BY n.seq DESC LIMIT 1)
                    UNION ALL
                    (SELECT n.* FROM messages n
                     WHERE n.conversation_pk = m.conversation_pk AND n.seq > m.seq AND {near}
                     ORDER BY n.seq LIMIT 1)
                ) n""",
            scope.username,
            scope.graphname,
            list(seqs),
            as_of.valid_time,
            as_of.transaction_time,
            list(around),
            timeout=timeout_s,
        )
        found = Episodes([], {})
        for r in rows:
            if r["seed"] is None:
                found.messages.append(read_message(r))
            else:
                found.neighbours.setdefault(int(r["seed"]), []).append(read_message(r))
        return found

    async def expire_episodes(self, cutoff: datetime, limit: int = 10_000) -> int:
        """Messages said before `cutoff` are no longer recalled (at most `limit` a call);
        returns how many."""
        row = await self._pool.fetchrow(_EXPIRE, cutoff, limit)
        assert row is not None
        return int(row["expired"])
