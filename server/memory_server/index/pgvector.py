"""The embedded vector index: pgvector in the service's own PostgreSQL.

Exact search within one scope by default: a scope holds at most `max_facts_per_scope` live
facts (plus their closed versions), so a scan of the scope's rows is cheap and never misses;
the as-of filter is part of the same WHERE clause, so it applies before ranking. The table is
created on first use, so a server whose users have no facts never touches it.

For scopes raised to tens of thousands of facts the table may have an HNSW index. Whether it
does is the database's, not a server's (issue 29): the kind, `exact` or `hnsw`, is recorded in
the one-row table `pgvector_index`, by the first server to make the vectors table (its
`pgvector_hnsw`) and afterwards only by `python -m memory_server.admin index-kind`, which
builds or drops the index concurrently. No server builds or drops it for its own settings, so
replicas configured differently cannot undo each other. While the kind is `hnsw` or the table
has any HNSW index, each search runs in a transaction that sets, locally, what an HNSW scan of
one scope needs (bench/README.md, hnsw_params.py): `hnsw.ef_search` candidates,
`hnsw.iterative_scan = strict_order` (else the scan stops at ef_search rows of any scope and
may return none of this one's), and `plan_cache_mode = force_custom_plan` (else a prepared
statement falls back to the average scope's plan, an exact sort, after five runs). PostgreSQL
still scans small scopes through the scope's btree, exactly. A search never starts on a
reading of that older than `KIND_REFRESH_S` (the first one after re-reads it); the admin
command records `hnsw` longer than that before it builds, so no search meets the index
without its settings.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import asyncpg

from memory_server.memory.ports import AsOf, LinkRecord, VectorHit, VectorRecord

log = logging.getLogger(__name__)

_TABLE = "memory_vectors"
HNSW_INDEX = f"{_TABLE}_hnsw"
IndexKind = Literal["exact", "hnsw"]
# How old a server's reading of the database's kind may be when a search starts.
KIND_REFRESH_S = 2.0
# Whether searches need HNSW's scan settings: the recorded kind says hnsw, or the table has an
# HNSW index of any name (valid or still being built: the settings cost nothing without one).
SCAN_WITH_HNSW = f"""SELECT coalesce((SELECT kind = 'hnsw' FROM pgvector_index), false)
                          OR EXISTS (SELECT 1 FROM pg_index i
                                     JOIN pg_class c ON c.oid = i.indexrelid
                                     JOIN pg_am a ON a.oid = c.relam
                                     WHERE i.indrelid = to_regclass('{_TABLE}')
                                       AND a.amname = 'hnsw')"""
# What an HNSW scan of one scope needs, in one statement: $1 ef_search; $2 true for the
# transaction only (the server's searches: a pooled connection keeps no session state), false
# for the whole session (a benchmark's own connection).
HNSW_SCAN = """SELECT set_config('hnsw.ef_search', $1, $2),
                       set_config('hnsw.iterative_scan', 'strict_order', $2),
                       set_config('plan_cache_mode', 'force_custom_plan', $2)"""


class PgVectorIndexError(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class Hnsw:
    """An HNSW index and how it is searched. The defaults reached recall@10 0.96-1.00 of the
    exact scan at 10,000 and 100,000 facts in a scope (bench/hnsw_params.py); m 16 with
    ef_construction 64 (pgvector's defaults) stayed at or below 0.948 whatever ef_search."""

    m: int = 32
    ef_construction: int = 200
    ef_search: int = 800

    def create_sql(self, *, concurrently: bool = False) -> str:
        how = "CONCURRENTLY " if concurrently else ""
        return f"""CREATE INDEX {how}IF NOT EXISTS {HNSW_INDEX} ON {_TABLE}
                   USING hnsw (embedding vector_cosine_ops)
                   WITH (m = {int(self.m)}, ef_construction = {int(self.ef_construction)})"""


# A scope's top-k believed at the as-of point ($4 transaction time, $5 valid time; NULL: now).
SEARCH = f"""SELECT version_id, 1 - (embedding <=> $2::vector) AS cosine
             FROM {_TABLE} v
             WHERE scope_hash = $1
               AND v.recorded_at <= COALESCE($4::timestamptz, now())
               AND (v.superseded_at IS NULL OR COALESCE($4::timestamptz, now()) < v.superseded_at)
               AND v.valid_from <= COALESCE($5::timestamptz, now())
               AND (v.valid_to IS NULL OR COALESCE($5::timestamptz, now()) < v.valid_to)
             ORDER BY embedding <=> $2::vector
             LIMIT $3"""


def _literal(vector: Sequence[float]) -> str:
    return "[" + ",".join(f"{x:.7g}" for x in vector) + "]"


class PgVectorIndex:
    def __init__(
        self,
        pool: asyncpg.Pool,
        dimension: int,
        hnsw: Hnsw | None = None,
        *,
        request: IndexKind | None = None,
    ) -> None:
        """`hnsw`: how an HNSW index is built and searched, when the database has one.
        `request`: the kind this server records if it is the first to make the vectors table
        (the `pgvector_hnsw` setting); by default `hnsw` when `hnsw` is given. Once a kind is
        recorded, the request is ignored (logged at INFO)."""
        self._pool = pool
        self._dimension = dimension
        self._hnsw = hnsw if hnsw is not None else Hnsw()
        self._request: IndexKind = request or ("hnsw" if hnsw is not None else "exact")
        self._ready = False
        self._lock = asyncio.Lock()
        self._scan_hnsw = False
        self._scan_read_at: float | None = None  # time.monotonic() of the reading
        self._scan_lock = asyncio.Lock()

    @property
    def name(self) -> str:
        return "pgvector"

    @property
    def loaded(self) -> bool:
        return self._ready

    @property
    def searches_with_hnsw(self) -> bool:
        """Whether this server's searches set HNSW's scan settings, as last read."""
        return self._scan_hnsw

    async def _ensure(self) -> None:
        if self._ready:
            return
        async with self._lock:
            if self._ready:
                return
            async with self._pool.acquire() as conn, conn.transaction():
                # Serializes first use across servers sharing the database, and against the
                # admin command's recording of a kind.
                await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1))", _TABLE)
                try:
                    await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
                except asyncpg.PostgresError as exc:
                    raise PgVectorIndexError(
                        "the embedded vector index needs the pgvector extension in PostgreSQL "
                        f"({exc}); install it, or configure another vector index"
                    ) from exc
                made = await self._make_table(conn)
                await self._settle_kind(conn, made)
                stored = await conn.fetchval(
                    """SELECT atttypmod FROM pg_attribute
                       WHERE attrelid = $1::regclass AND attname = 'embedding'""",
                    _TABLE,
                )
                if stored != self._dimension:
                    raise PgVectorIndexError(
                        f"{_TABLE} holds {stored}-dimensional vectors, the embedder makes "
                        f"{self._dimension}; re-embed"
                    )
                started = time.monotonic()
                self._scan_hnsw = bool(await conn.fetchval(SCAN_WITH_HNSW))
            self._scan_read_at = started
            self._ready = True

    async def _make_table(self, conn: asyncpg.Connection) -> bool:
        """Makes what is missing; whether the table is new. Nothing is run on what exists: a
        CREATE INDEX IF NOT EXISTS still takes a SHARE lock first, which would queue behind an
        index being built concurrently (the admin command) and every write behind it."""
        if await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", _TABLE):
            if not await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", f"{_TABLE}_scope"):
                await conn.execute(f"CREATE INDEX {_TABLE}_scope ON {_TABLE} (scope_hash)")
            return False
        await conn.execute(
            f"""CREATE TABLE {_TABLE} (
                    version_id    uuid PRIMARY KEY,
                    scope_hash    text NOT NULL,
                    valid_from    timestamptz NOT NULL,
                    valid_to      timestamptz,
                    recorded_at   timestamptz NOT NULL,
                    superseded_at timestamptz,
                    embedding     vector({self._dimension}) NOT NULL)"""
        )
        await conn.execute(f"CREATE INDEX {_TABLE}_scope ON {_TABLE} (scope_hash)")
        return True

    async def _settle_kind(self, conn: asyncpg.Connection, table_is_new: bool) -> None:
        """Records the database's kind if none is yet (an HNSW index already there says hnsw;
        else this server's request, on a new table; else exact), and makes the HNSW index with
        a new table when the kind is hnsw: on an empty table that takes no time. An existing
        table is never given or deprived of an index here."""
        recorded = await conn.fetchval("SELECT kind FROM pgvector_index")
        has_index = await conn.fetchval(
            "SELECT to_regclass($1) IS NOT NULL AND (SELECT indisvalid FROM pg_index "
            "WHERE indexrelid = to_regclass($1))",
            HNSW_INDEX,
        )
        if recorded is None:
            kind = "hnsw" if has_index else (self._request if table_is_new else "exact")
            why = "its HNSW index" if has_index else f"first use, {self._request} requested"
            await conn.execute(
                "INSERT INTO pgvector_index (kind, changed_by) VALUES ($1, $2)", kind, why
            )
            log.info("pgvector index: recorded %s in the database (%s)", kind, why)
        else:
            kind = recorded
            log.info(
                "pgvector index: %s, as the database records%s",
                kind,
                ""
                if kind == self._request
                else f"; this server's request ({self._request}, pgvector_hnsw) is ignored:"
                " change the kind with `python -m memory_server.admin index-kind`",
            )
        if kind == "hnsw" and table_is_new:
            await conn.execute(self._hnsw.create_sql())
        elif kind == "hnsw" and not has_index:
            log.warning(
                "pgvector index: the database records hnsw but %s is missing or not valid; "
                "build it with `python -m memory_server.admin index-kind hnsw`",
                HNSW_INDEX,
            )

    async def reset(self) -> None:
        """Drops every vector (re-embedding): the table is made again, at the embedder's
        dimension, on next use."""
        async with self._lock:
            await self._pool.execute(f"DROP TABLE IF EXISTS {_TABLE}")
            self._ready = False

    async def upsert(
        self, records: Sequence[VectorRecord], links: Sequence[LinkRecord] = ()
    ) -> None:
        # Links live in this same PostgreSQL (fact_links): nothing to mirror.
        if not records:
            return
        await self._ensure()
        await self._pool.execute(
            f"""INSERT INTO {_TABLE} AS t (version_id, scope_hash, valid_from, valid_to,
                                          recorded_at, superseded_at, embedding)
                SELECT u.id, u.scope_hash, u.valid_from, u.valid_to, u.recorded_at,
                       u.superseded_at, u.embedding::vector
                FROM unnest($1::uuid[], $2::text[], $3::timestamptz[], $4::timestamptz[],
                            $5::timestamptz[], $6::timestamptz[], $7::text[])
                     AS u(id, scope_hash, valid_from, valid_to, recorded_at, superseded_at,
                          embedding)
                ON CONFLICT (version_id) DO UPDATE SET
                    scope_hash = EXCLUDED.scope_hash, valid_from = EXCLUDED.valid_from,
                    valid_to = EXCLUDED.valid_to, recorded_at = EXCLUDED.recorded_at,
                    superseded_at = EXCLUDED.superseded_at, embedding = EXCLUDED.embedding""",
            [uuid.UUID(r.version_id) for r in records],
            [r.scope_hash for r in records],
            [r.valid_from for r in records],
            [r.valid_to for r in records],
            [r.recorded_at for r in records],
            [r.superseded_at for r in records],
            [_literal(r.vector) for r in records],
        )

    async def delete(self, version_ids: Sequence[str]) -> None:
        if not version_ids:
            return
        await self._ensure()
        await self._pool.execute(
            f"DELETE FROM {_TABLE} WHERE version_id = ANY($1::uuid[])",
            [uuid.UUID(v) for v in version_ids],
        )

    async def purge_scope(self, scope_hash: str) -> None:
        await self._ensure()
        await self._pool.execute(f"DELETE FROM {_TABLE} WHERE scope_hash = $1", scope_hash)

    async def search(
        self, scope_hash: str, vector: Sequence[float], k: int, as_of: AsOf
    ) -> list[VectorHit]:
        await self._ensure()
        rows = await self._fetch(
            SEARCH,
            scope_hash,
            _literal(vector),
            k,
            as_of.transaction_time,
            as_of.valid_time,
        )
        return [VectorHit(str(r["version_id"]), float(r["cosine"])) for r in rows]

    async def neighbours(
        self, scope_hash: str, vectors: Sequence[Sequence[float]], k: int
    ) -> list[list[VectorHit]]:
        """One statement for the whole batch: an exact top-k per vector over the scope's live
        rows (LATERAL), as `search` does for one."""
        if not vectors or k <= 0:
            return [[] for _ in vectors]
        await self._ensure()
        rows = await self._fetch(
            # Each query vector is parsed once (MATERIALIZED), not once per row it meets.
            f"""WITH q AS MATERIALIZED (
                    SELECT u.i, u.vec::vector AS vec
                    FROM unnest($2::text[]) WITH ORDINALITY AS u(vec, i))
                SELECT q.i, h.version_id, h.cosine
                FROM q CROSS JOIN LATERAL (
                    SELECT v.version_id, 1 - (v.embedding <=> q.vec) AS cosine
                    FROM {_TABLE} v
                    WHERE v.scope_hash = $1 AND v.superseded_at IS NULL AND v.valid_to IS NULL
                    ORDER BY v.embedding <=> q.vec
                    LIMIT $3) h
                ORDER BY q.i, h.cosine DESC""",
            scope_hash,
            [_literal(v) for v in vectors],
            k,
        )
        out: list[list[VectorHit]] = [[] for _ in vectors]
        for r in rows:
            out[int(r["i"]) - 1].append(VectorHit(str(r["version_id"]), float(r["cosine"])))
        return out

    async def _fetch(self, sql: str, *args: object) -> list[asyncpg.Record]:
        """A ranking statement: as it is without HNSW; with it, in a transaction whose local
        settings make the HNSW scan find the scope's rows (module docstring)."""
        if not await self._hnsw_scan():
            return list(await self._pool.fetch(sql, *args))
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(HNSW_SCAN, str(int(self._hnsw.ef_search)), True)
            return list(await conn.fetch(sql, *args))

    async def _hnsw_scan(self) -> bool:
        """Whether a search starting now sets HNSW's scan settings, from a reading of the
        database at most KIND_REFRESH_S old (one small catalog statement when it is older; a
        search waits for it rather than use the old one: module docstring)."""
        if self._scan_fresh():
            return self._scan_hnsw
        async with self._scan_lock:
            if not self._scan_fresh():
                started = time.monotonic()
                self._scan_hnsw = bool(await self._pool.fetchval(SCAN_WITH_HNSW))
                self._scan_read_at = started
        return self._scan_hnsw

    def _scan_fresh(self) -> bool:
        read_at = self._scan_read_at
        return read_at is not None and time.monotonic() - read_at < KIND_REFRESH_S

    async def count(self, scope_hash: str) -> int:
        await self._ensure()
        return int(
            await self._pool.fetchval(
                f"SELECT count(*) FROM {_TABLE} WHERE scope_hash = $1", scope_hash
            )
        )

    async def vectors(self, scope_hash: str, version_ids: Sequence[str]) -> dict[str, list[float]]:
        if not version_ids:
            return {}
        await self._ensure()
        rows = await self._pool.fetch(
            f"SELECT version_id, embedding::text AS v FROM {_TABLE} "
            "WHERE scope_hash = $1 AND version_id = ANY($2::uuid[])",
            scope_hash,
            [uuid.UUID(v) for v in version_ids],
        )
        # pgvector's text form is a JSON array.
        return {str(r["version_id"]): json.loads(r["v"]) for r in rows}

    async def version_ids(self, scope_hash: str) -> set[str]:
        """Every version the index holds for the scope (for convergence checks)."""
        await self._ensure()
        rows = await self._pool.fetch(
            f"SELECT version_id FROM {_TABLE} WHERE scope_hash = $1", scope_hash
        )
        return {str(r["version_id"]) for r in rows}
