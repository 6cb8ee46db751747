"""The pgvector index kind is the database's: `python -m memory_server.admin index-kind`
builds and drops the HNSW index concurrently, idempotently, while servers serve; servers that
share a database, whatever their `pgvector_hnsw`, neither drop nor build it, and search with
HNSW's scan settings exactly while the database has it."""

from __future__ import annotations

import asyncio
import random
import sys
import time
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import asyncpg
import pytest

from memory_client.v1 import memory_pb2 as pb
from memory_server.index.pgvector import PgVectorIndex
from memory_server.index.pgvector_kind import (
    PgVectorKindError,
    describe,
    read_state,
    switch,
)
from memory_server.memory.ports import AsOf, VectorRecord
from memory_server.store.schema import apply_migrations

from conftest import RunningServer, ServerFactory, assert_eventually, outbox_caught_up

DIM = 8
T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
async def pool(fresh_database_url: str) -> AsyncIterator[asyncpg.Pool]:
    async with asyncpg.create_pool(fresh_database_url, min_size=1, max_size=4) as pool:
        async with pool.acquire() as conn:
            await apply_migrations(conn)
        yield pool


@pytest.fixture
async def admin(fresh_database_url: str, pool: asyncpg.Pool) -> AsyncIterator[asyncpg.Connection]:
    """The admin command's own connection."""
    conn = await asyncpg.connect(fresh_database_url)
    yield conn
    await conn.close()


def _unit(rng: random.Random) -> list[float]:
    raw = [rng.gauss(0, 1) for _ in range(DIM)]
    norm = sum(x * x for x in raw) ** 0.5
    return [x / norm for x in raw]


async def _hnsw_index(conn: asyncpg.Connection | asyncpg.Pool) -> tuple[int, bool] | None:
    """(oid, valid) of memory_vectors_hnsw, or None."""
    row = await conn.fetchrow(
        "SELECT indexrelid::int AS oid, indisvalid FROM pg_index "
        "WHERE indexrelid = to_regclass('memory_vectors_hnsw')"
    )
    return None if row is None else (row["oid"], row["indisvalid"])


async def _seeded(pool: asyncpg.Pool) -> tuple[PgVectorIndex, list[list[float]]]:
    """A server's index on a fresh database (exact recorded), with one small scope."""
    rng = random.Random(3)
    index = PgVectorIndex(pool, DIM)
    await index.upsert(
        [VectorRecord(str(uuid.uuid4()), "s", _unit(rng), T0, None, T0, None) for _ in range(50)]
    )
    return index, [_unit(rng) for _ in range(5)]


async def _top(index: PgVectorIndex, questions: list[list[float]]) -> list[list[str]]:
    return [[h.version_id for h in await index.search("s", q, 5, AsOf())] for q in questions]


async def test_switching_is_idempotent_and_keeps_the_answers(
    pool: asyncpg.Pool, admin: asyncpg.Connection
) -> None:
    index, questions = await _seeded(pool)
    exact = await _top(index, questions)
    assert not index.searches_with_hnsw

    assert await switch(admin, "hnsw", settle_s=0)
    built = await _hnsw_index(admin)
    assert built is not None and built[1]
    assert not await switch(admin, "hnsw", settle_s=0)  # nothing to do: not built again
    assert await _hnsw_index(admin) == built
    fresh = PgVectorIndex(pool, DIM)
    assert await _top(fresh, questions) == exact
    assert fresh.searches_with_hnsw

    assert await switch(admin, "exact")
    assert await _hnsw_index(admin) is None
    assert not await switch(admin, "exact")
    assert (await read_state(admin)).recorded == "exact"
    fresh = PgVectorIndex(pool, DIM)
    assert await _top(fresh, questions) == exact
    assert not fresh.searches_with_hnsw


async def test_an_interrupted_build_is_built_again(
    pool: asyncpg.Pool, admin: asyncpg.Connection
) -> None:
    await _seeded(pool)
    assert await switch(admin, "hnsw", settle_s=0)
    first = await _hnsw_index(admin)
    assert first is not None
    # What a cancelled CREATE INDEX CONCURRENTLY leaves: the index, not valid.
    await admin.execute(
        "UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'memory_vectors_hnsw'::regclass"
    )
    assert "NOT VALID" in "\n".join(describe(await read_state(admin)))
    said: list[str] = []
    assert await switch(admin, "hnsw", settle_s=0, say=said.append)
    again = await _hnsw_index(admin)
    assert again is not None and again[1] and again[0] != first[0]
    assert any("interrupted" in line for line in said), said


async def test_hnsw_waits_for_servers_before_it_builds(
    pool: asyncpg.Pool, admin: asyncpg.Connection
) -> None:
    index, questions = await _seeded(pool)
    await _top(index, questions)
    run = asyncio.ensure_future(switch(admin, "hnsw", settle_s=4))
    try:

        async def recorded() -> bool:
            return await pool.fetchval("SELECT kind FROM pgvector_index") == "hnsw"

        await assert_eventually(recorded, what="hnsw recorded")
        # Recorded, not yet built: a running server's next search after its reading ages
        # (KIND_REFRESH_S, 2 s) already sets the scan settings.
        began = time.monotonic()
        while not index.searches_with_hnsw and time.monotonic() - began < 5:
            await _top(index, questions[:1])
            await asyncio.sleep(0.1)
        assert index.searches_with_hnsw
        assert await _hnsw_index(pool) is None  # (the admin connection is the command's)
    finally:
        assert await run
    assert await _hnsw_index(admin) is not None


async def test_two_runs_at_once_are_refused(
    fresh_database_url: str, pool: asyncpg.Pool, admin: asyncpg.Connection
) -> None:
    await _seeded(pool)
    other = await asyncpg.connect(fresh_database_url)
    try:
        await other.execute(
            "SELECT pg_advisory_lock(hashtext('memory_server.index.pgvector_kind'))"
        )
        with pytest.raises(PgVectorKindError, match="under way"):
            await switch(admin, "hnsw", settle_s=0)
    finally:
        await other.close()
    assert await switch(admin, "hnsw", settle_s=0)


async def test_a_server_starts_beside_a_concurrent_build(
    pool: asyncpg.Pool, admin: asyncpg.Connection
) -> None:
    """A build holds SHARE UPDATE EXCLUSIVE on the table for as long as it runs: a server's
    first use must not queue behind it (a CREATE INDEX IF NOT EXISTS would, and every write
    behind that)."""
    await _seeded(pool)
    async with admin.transaction():
        await admin.execute("LOCK TABLE memory_vectors IN SHARE UPDATE EXCLUSIVE MODE")
        index = PgVectorIndex(pool, DIM)
        assert await asyncio.wait_for(index.count("s"), timeout=10) == 50


async def _search(memory: RunningServer, scope: dict[str, str]) -> list[tuple[str, float]]:
    found = await memory.stub.SearchFacts(
        pb.SearchFactsRequest(**scope, query="which drinks does the user like", threshold=0.0)
    )
    return [(r.fact.text, round(r.score, 5)) for r in found.results]


async def _admin_command(url: str, command: str) -> str:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "memory_server.admin",
        "index-kind",
        command,
        "--database-url",
        url,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=120)
    assert process.returncode == 0, err.decode()
    return out.decode()


@pytest.mark.slow
async def test_servers_sharing_a_database_follow_its_kind(
    start_server: ServerFactory, fresh_database_url: str, scope: dict[str, str]
) -> None:
    asking = await start_server(database_url=fresh_database_url, pgvector_hnsw=True)
    for text in ("Likes green tea", "Drinks coffee with oat milk", "Has a cat named Miso"):
        await asking.stub.AddFact(pb.AddFactRequest(**scope, text=text))
    await outbox_caught_up(asking)  # the first use: the table, recorded hnsw, the index
    catalog = await asyncpg.connect(fresh_database_url)
    try:
        built = await _hnsw_index(catalog)
        assert built is not None
        # A replica without the setting (today's code dropped the index here).
        plain = await start_server(database_url=fresh_database_url, pgvector_hnsw=False)
        answer = await _search(plain, scope)
        assert answer and answer == await _search(asking, scope)
        assert await _hnsw_index(catalog) == built
        servers = (asking, plain)
        indexes = [s.server.index for s in servers]
        assert all(isinstance(i, PgVectorIndex) and i.searches_with_hnsw for i in indexes)

        async def searches_with(hnsw: bool) -> bool:
            for server in servers:
                assert await _search(server, scope) == answer
            return all(getattr(i, "searches_with_hnsw", None) is hnsw for i in indexes)

        said = await _admin_command(fresh_database_url, "exact")
        assert "recorded; was hnsw" in said and "dropped" in said, said
        assert await _hnsw_index(catalog) is None
        await assert_eventually(lambda: searches_with(False), what="exact scans on both")

        said = await _admin_command(fresh_database_url, "hnsw")
        assert "waiting" in said and "built in" in said, said
        rebuilt = await _hnsw_index(catalog)
        assert rebuilt is not None and rebuilt[1]
        assert await searches_with(True)  # the wait made both read it before the build

        said = await _admin_command(fresh_database_url, "hnsw")  # again: nothing to do
        assert "recorded already" in said and "nothing to build" in said, said
        assert await _hnsw_index(catalog) == rebuilt
        said = await _admin_command(fresh_database_url, "show")
        assert "kind: hnsw" in said and "searches: with HNSW's scan settings" in said, said

        # A replica started again without the setting: the index stays.
        again = await start_server(database_url=fresh_database_url)
        assert await _search(again, scope) == answer
        assert await _hnsw_index(catalog) == rebuilt
    finally:
        await catalog.close()
