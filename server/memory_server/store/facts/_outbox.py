"""The vector outbox, read side: claiming the rows the vector index has yet to see, with the
current state of their versions, and the embedding model the stored vectors were made with.

The rows themselves are written by each fact change, in its own transaction (ChangeTransaction); the
outbox actor (memory_server.outbox) sends what it claims here and marks it done or retried in
the claiming transaction. Migration 0003 calls this `store/facts.py claim_outbox`: it was one
module then, and shipped migrations are never edited (store/schema.py).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta

import asyncpg

from memory_server.memory.identity import (
    EPISODE_EMBED_CHARS,
    EPISODE_PARTITION_SUFFIX,
    episode_partition,
    episode_seq,
    episode_vector_id,
)
from memory_server.memory.ports import AsOf, LinkRecord
from memory_server.outbox.port import Backlog, OutboxItem, VectorSource
from memory_server.store.facts._links import close_links, record_links
from memory_server.store.facts._sql import OnPool, optional_id
from memory_server.store.rows import row_reader

_read_outbox_item = row_reader(OutboxItem, version_id=optional_id)


def _source(row: asyncpg.Record, id_column: str) -> VectorSource:
    return VectorSource(
        str(row[id_column]),
        row["scope_hash"],
        row["text"],
        row["valid_from"],
        row["valid_to"],
        row["recorded_at"],
        row["superseded_at"],
    )


def _episode(row: asyncpg.Record, partition: str) -> VectorSource:
    """A message as the index keeps it: valid from when it was said, recorded from when it was
    stored, never closed (erasure removes it; memory.identity.episode_partition)."""
    return VectorSource(
        episode_vector_id(row["seq"]),
        partition,
        row["content"],
        row["created_at"],
        None,
        row["recorded_at"],
        None,
        episode=True,
    )


class ClaimedRows:
    """Claimed outbox rows, locked until the surrounding transaction ends (outbox.port's
    OutboxBatch)."""

    def __init__(self, conn: asyncpg.Connection, items: list[OutboxItem]) -> None:
        self._conn = conn
        self.items = items

    async def sources(self) -> dict[str, VectorSource]:
        upserts = [i for i in self.items if i.op == "upsert"]
        ids = [uuid.UUID(i.version_id) for i in upserts if i.kind == "fact"]
        seqs = [episode_seq(i.version_id) for i in upserts if i.kind == "episode"]
        found: dict[str, VectorSource] = {}
        if ids:
            rows = await self._conn.fetch(
                """SELECT v.id, s.scope_hash, v.text, v.valid_from, v.valid_to, v.recorded_at,
                          v.superseded_at
                   FROM fact_versions v JOIN scopes s ON s.id = v.scope_id
                   WHERE v.id = ANY($1::uuid[])""",
                ids,
            )
            found.update((str(r["id"]), _source(r, "id")) for r in rows)
        if seqs:
            # An episode is valid and recorded from when it was said; erasure removes it
            # rather than closing it (memory.identity.episode_partition: its own partition).
            rows = await self._conn.fetch(
                """SELECT m.seq, s.scope_hash, left(m.content, $2) AS content, m.created_at,
                          m.recorded_at
                   FROM messages m JOIN scopes s ON s.id = m.scope_id
                   WHERE m.seq = ANY($1::bigint[]) AND m.recallable""",
                seqs,
                EPISODE_EMBED_CHARS,
            )
            for r in rows:
                source = _episode(r, episode_partition(r["scope_hash"]))
                found[source.version_id] = source
        return found

    async def record_links(self, pairs: Sequence[tuple[str, str, float]]) -> list[LinkRecord]:
        """See store.facts._links.record_links; committed with the batch."""
        return await record_links(self._conn, pairs)

    async def close_links(self, version_ids: Sequence[str]) -> list[LinkRecord]:
        """See store.facts._links.close_links; committed with the batch."""
        return await close_links(self._conn, version_ids)

    async def done(self) -> None:
        await self._conn.execute(
            "DELETE FROM vector_outbox WHERE id = ANY($1::bigint[])", [i.id for i in self.items]
        )

    async def retry(self, error: str, delay_s: float) -> None:
        await self._conn.execute(
            """UPDATE vector_outbox SET attempts = attempts + 1, last_error = $2,
                      next_attempt_at = now() + $3::interval
               WHERE id = ANY($1::bigint[])""",
            [i.id for i in self.items],
            error[:500],
            timedelta(seconds=delay_s),
        )


class EmbeddingModelMismatch(RuntimeError):
    pass


class VectorOutbox(OnPool):
    @asynccontextmanager
    async def claim_outbox(self, limit: int) -> AsyncIterator[ClaimedRows]:
        """Claims due outbox rows for the duration of the block (FOR UPDATE SKIP LOCKED).

        A row whose version has an older row this claim did not get (another server is sending
        it, or it waits for a retry) is left for later: the index must see a version's changes
        in order, or a server still sending the version as it was could overwrite, say, its
        closing sent meanwhile by another."""
        async with self._pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(
                """WITH claimed AS (
                       SELECT id, scope_hash, op, version_id, attempts, kind FROM vector_outbox
                       WHERE next_attempt_at <= now() ORDER BY id LIMIT $1
                       FOR UPDATE SKIP LOCKED)
                   SELECT c.* FROM claimed c
                   WHERE c.version_id IS NULL OR NOT EXISTS (
                       SELECT 1 FROM vector_outbox o
                       WHERE o.version_id = c.version_id AND o.id < c.id
                         AND o.id NOT IN (SELECT id FROM claimed))
                   ORDER BY c.id""",
                limit,
            )
            yield ClaimedRows(conn, [_read_outbox_item(r) for r in rows])

    async def pending_sources(self, scope_hash: str, as_of: AsOf, limit: int) -> list[VectorSource]:
        """The scope's versions whose upsert is still in the outbox and that are believed at
        the as-of point (the index's own predicate), one row each: what a search must score
        itself to find a write the index has not seen yet. For an episode partition, the
        scope's messages waiting (memory.identity.episode_partition)."""
        if scope_hash.endswith(EPISODE_PARTITION_SUFFIX):
            return await self._pending_episodes(
                scope_hash.removesuffix(EPISODE_PARTITION_SUFFIX), as_of, limit
            )
        rows = await self._pool.fetch(
            """SELECT DISTINCT ON (o.version_id) o.id, v.id AS version_id, o.scope_hash, v.text,
                      v.valid_from, v.valid_to, v.recorded_at, v.superseded_at
               FROM vector_outbox o JOIN fact_versions v ON v.id = o.version_id
               WHERE o.scope_hash = $1 AND o.op = 'upsert'
                 AND v.recorded_at <= COALESCE($2::timestamptz, now())
                 AND (v.superseded_at IS NULL
                      OR COALESCE($2::timestamptz, now()) < v.superseded_at)
                 AND v.valid_from <= COALESCE($3::timestamptz, now())
                 AND (v.valid_to IS NULL OR COALESCE($3::timestamptz, now()) < v.valid_to)
               ORDER BY o.version_id, o.id
               LIMIT $4""",
            scope_hash,
            as_of.transaction_time,
            as_of.valid_time,
            limit,
        )
        return [_source(r, "version_id") for r in rows]

    async def _pending_episodes(
        self, scope_hash: str, as_of: AsOf, limit: int
    ) -> list[VectorSource]:
        rows = await self._pool.fetch(
            """SELECT DISTINCT ON (o.version_id) o.id, m.seq, left(m.content, $5) AS content,
                      m.created_at, m.recorded_at
               FROM vector_outbox o JOIN messages m ON m.seq = episode_seq_of(o.version_id)
               WHERE o.scope_hash = $1 AND o.op = 'upsert' AND o.kind = 'episode'
                 AND m.recallable
                 AND m.recorded_at <= COALESCE($2::timestamptz, now())
                 AND m.created_at <= COALESCE($3::timestamptz, now())
               ORDER BY o.version_id, o.id
               LIMIT $4""",
            scope_hash,
            as_of.transaction_time,
            as_of.valid_time,
            limit,
            EPISODE_EMBED_CHARS,
        )
        partition = episode_partition(scope_hash)
        return [_episode(r, partition) for r in rows]

    async def backlog(self) -> Backlog:
        """The rows waiting and the age of the oldest: the vector index's lag. One cheap
        statement: rows leave the outbox once the index has them."""
        row = await self._pool.fetchrow(
            """SELECT count(*) AS waiting,
                      coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8 AS oldest_s
               FROM vector_outbox"""
        )
        assert row is not None
        return Backlog(int(row["waiting"]), float(row["oldest_s"]))

    async def check_embedding_model(self, model_name: str, dimension: int) -> None:
        """Records the model on first use; a different one later is an error."""
        row = await self._pool.fetchrow(
            """WITH ins AS (
                   INSERT INTO embedding_model (model_name, dimension) VALUES ($1, $2)
                   ON CONFLICT DO NOTHING RETURNING model_name, dimension)
               SELECT model_name, dimension FROM ins
               UNION ALL SELECT model_name, dimension FROM embedding_model LIMIT 1""",
            model_name,
            dimension,
        )
        if row is None:
            # Another server recorded it at the same moment: the INSERT waited for its commit,
            # but this statement's snapshot is older. The next statement sees that row.
            row = await self._pool.fetchrow("SELECT model_name, dimension FROM embedding_model")
        if (row["model_name"], row["dimension"]) != (model_name, dimension):
            raise EmbeddingModelMismatch(
                f"the stored vectors were made with {row['model_name']} "
                f"({row['dimension']} dimensions), not {model_name} ({dimension}); "
                "run `python -m memory_server.admin reembed` with the new model's settings, "
                "or configure the original model"
            )
