"""pgvector's HNSW index: the database's (tests/test_pgvector_kind.py has the admin command and
servers sharing a database). A fresh database records the first server's request and makes the
index with the table; a server asking for something else neither drops nor builds it; a large
scope is ranked through it, with what an HNSW scan of one scope needs set for the search alone,
close to the exact answer."""

from __future__ import annotations

import random
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import asyncpg
import pytest

from memory_server.index.pgvector import HNSW_SCAN, SEARCH, Hnsw, PgVectorIndex
from memory_server.index.pgvector_kind import switch
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


async def recorded(pool: asyncpg.Pool) -> str | None:
    return await pool.fetchval("SELECT kind FROM pgvector_index")


async def test_a_server_without_the_setting_keeps_the_index(
    pool: asyncpg.Pool, caplog: pytest.LogCaptureFixture
) -> None:
    # The first server to make the table records what it asks for and makes the index with it.
    first = PgVectorIndex(pool, DIM, Hnsw())
    await first.count("none")
    assert await recorded(pool) == "hnsw"
    made = await index_options(pool)
    assert made is not None
    assert "hnsw" in made and "m='32'" in made and "ef_construction='200'" in made
    assert first.searches_with_hnsw
    # A restart with the setting off (or a replica without it) drops nothing, and searches
    # with the scan settings of the index it finds: the database's kind, not its own.
    caplog.set_level("INFO", logger="memory_server.index.pgvector")
    second = PgVectorIndex(pool, DIM)
    await second.count("none")
    assert await index_options(pool) == made
    assert await recorded(pool) == "hnsw"
    assert second.searches_with_hnsw
    assert "request (exact, pgvector_hnsw) is ignored" in caplog.text


async def test_a_recorded_exact_is_not_overridden_by_a_server(pool: asyncpg.Pool) -> None:
    plain = PgVectorIndex(pool, DIM)
    await plain.count("none")
    assert await recorded(pool) == "exact"
    asking = PgVectorIndex(pool, DIM, Hnsw())
    await asking.count("none")
    assert await index_options(pool) is None
    assert await recorded(pool) == "exact"
    assert not asking.searches_with_hnsw and not plain.searches_with_hnsw


async def test_an_upgraded_database_records_what_it_has(pool: asyncpg.Pool) -> None:
    # Before migration 0009 a server with pgvector_hnsw made the index; nothing was recorded.
    await PgVectorIndex(pool, DIM, Hnsw()).count("none")
    await pool.execute("DELETE FROM pgvector_index")
    await PgVectorIndex(pool, DIM).count("none")
    assert await recorded(pool) == "hnsw"
    assert await index_options(pool) is not None
    # An existing table without the index, nothing recorded: exact, whatever is asked (a
    # server never builds over existing rows at start).
    await pool.execute("DELETE FROM pgvector_index")
    await pool.execute("DROP INDEX memory_vectors_hnsw")
    await PgVectorIndex(pool, DIM, Hnsw()).count("none")
    assert await recorded(pool) == "exact"
    assert await index_options(pool) is None


async def test_a_reset_table_gets_the_recorded_index_back(pool: asyncpg.Pool) -> None:
    index = PgVectorIndex(pool, DIM, Hnsw())
    await index.count("none")
    await index.reset()  # re-embedding drops the table
    assert await index_options(pool) is None
    await PgVectorIndex(pool, DIM).count("none")
    assert await index_options(pool) is not None


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
    async with pool.acquire() as conn:  # the admin command, without its wait for servers
        assert await switch(conn, "hnsw", settle_s=0)
    hnsw = PgVectorIndex(pool, DIM, Hnsw(ef_search=200))
    await hnsw.count(big)
    assert hnsw.searches_with_hnsw
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
