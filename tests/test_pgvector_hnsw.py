"""pgvector with `pgvector_hnsw`: the index is made with its parameters (and dropped when the
setting is off), and a large scope is ranked through it, with what an HNSW scan of one scope
needs set for the search alone, close to the exact answer."""

from __future__ import annotations

import random
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import asyncpg
import pytest

from memory_server.index.pgvector import HNSW_SCAN, SEARCH, Hnsw, PgVectorIndex
from memory_server.memory.ports import AsOf, VectorRecord
from memory_server.store.schema import apply_migrations

DIM = 16
T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
async def pool(fresh_database_url: str) -> AsyncIterator[asyncpg.Pool]:
    async with asyncpg.create_pool(fresh_database_url, min_size=1, max_size=2) as pool:
        async with pool.acquire() as conn:
            await apply_migrations(conn)
        yield pool


def vector(rng: random.Random) -> list[float]:
    raw = [rng.gauss(0, 1) for _ in range(DIM)]
    norm = sum(x * x for x in raw) ** 0.5
    return [x / norm for x in raw]


async def index_options(pool: asyncpg.Pool) -> str | None:
    return await pool.fetchval(
        "SELECT indexdef FROM pg_indexes WHERE indexname = 'memory_vectors_hnsw'"
    )


async def test_the_index_follows_the_setting(pool: asyncpg.Pool) -> None:
    await PgVectorIndex(pool, DIM).count("none")
    assert await index_options(pool) is None
    await PgVectorIndex(pool, DIM, Hnsw()).count("none")
    made = await index_options(pool)
    assert made is not None
    assert "hnsw" in made and "m='32'" in made and "ef_construction='200'" in made
    # Off again (a restart with the setting off): no scan may use an index it does not tune.
    await PgVectorIndex(pool, DIM).count("none")
    assert await index_options(pool) is None


async def test_a_large_scope_is_ranked_through_the_index_close_to_exact(
    pool: asyncpg.Pool,
) -> None:
    rng = random.Random(7)
    big, small = "scope-big", "scope-small"
    records = [
        VectorRecord(str(uuid.uuid4()), scope, vector(rng), T0, None, T0, None)
        for scope, n in ((big, 20000), (small, 30))
        for _ in range(n)
    ]
    exact_index = PgVectorIndex(pool, DIM)
    await exact_index.upsert(records)
    hnsw = PgVectorIndex(pool, DIM, Hnsw(ef_search=200))
    await hnsw.count(big)  # builds the index over what is there
    await pool.execute("ANALYZE memory_vectors")
    questions = [vector(rng) for _ in range(20)]
    shares = []
    for q in questions:
        exact = await _exact(pool, big, q)
        found = await hnsw.search(big, q, 10, AsOf())
        assert len(found) == 10
        shares.append(len({h.version_id for h in found} & set(exact)) / 10)
    assert sum(shares) / len(shares) >= 0.9
    # The small scope is still ranked exactly, and only its own rows come back.
    small_ids = {r.version_id for r in records if r.scope_hash == small}
    for q in questions[:5]:
        found = await hnsw.search(small, q, 10, AsOf())
        assert [h.version_id for h in found] == await _exact(pool, small, q)
        assert {h.version_id for h in found} <= small_ids
    # The plan the search's own statement gets under its own local settings: the HNSW index
    # for the big scope, the scope's btree (exact) for the small one.
    for scope, wanted in ((big, "memory_vectors_hnsw"), (small, "memory_vectors_scope")):
        async with pool.acquire() as conn, conn.transaction():
            await conn.execute(HNSW_SCAN, "200", True)
            plan = await conn.fetch(
                "EXPLAIN " + SEARCH, scope, "[" + ",".join(map(str, questions[0])) + "]", 10,
                None, None,
            )  # fmt: skip
        assert wanted in "\n".join(r[0] for r in plan), (scope, plan)
    # Nothing of the search's settings is left on a pooled connection.
    assert await pool.fetchval("SHOW hnsw.ef_search") == "40"
    assert await pool.fetchval("SHOW plan_cache_mode") == "auto"


async def _exact(pool: asyncpg.Pool, scope: str, q: list[float]) -> list[str]:
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("SET LOCAL enable_indexscan = off")
        rows = await conn.fetch(
            "SELECT version_id FROM memory_vectors WHERE scope_hash = $1"
            " ORDER BY embedding <=> $2::vector LIMIT 10",
            scope,
            "[" + ",".join(str(x) for x in q) + "]",
        )
    return [str(r["version_id"]) for r in rows]
