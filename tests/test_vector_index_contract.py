"""One contract for every VectorIndex: the embedded pgvector index and the TigerGraph index
(against the loopback TigerGraph double). Small hand-made unit vectors; no model."""

from __future__ import annotations

import math
import os
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from memory_server.index.pgvector import Hnsw, PgVectorIndex
from memory_server.index.tigergraph import TigerGraphIndex, install_schema
from memory_server.memory.ports import AsOf, VectorIndex, VectorRecord
from memory_server.store.schema import apply_migrations

from tg_server import serve_tigergraph

DIM = 8
T0 = datetime(2024, 1, 1, tzinfo=UTC)


def unit(*xs: float) -> list[float]:
    v = list(xs) + [0.0] * (DIM - len(xs))
    n = math.sqrt(sum(x * x for x in v))
    return [x / n for x in v]


def rec(
    scope: str,
    vector: list[float],
    *,
    vid: str | None = None,
    valid_from: datetime = T0,
    valid_to: datetime | None = None,
    recorded_at: datetime = T0,
    superseded_at: datetime | None = None,
) -> VectorRecord:
    return VectorRecord(
        vid or str(uuid.uuid4()), scope, vector, valid_from, valid_to, recorded_at, superseded_at
    )


# A real TigerGraph (>= 4.2) joins the suite when TG_HOST is set: TG_GRAPH names a graph the
# suite may add the MemoryEmbedding vertex to (use a dedicated one: its vectors get DIM
# dimensions), with TG_TOKEN, TG_GSQL_SECRET, or TG_USERNAME and TG_PASSWORD.
_BACKENDS = ["pgvector", "pgvector-hnsw", "tigergraph"] + (
    ["tigergraph-real"] if os.environ.get("TG_HOST") else []
)


@pytest.fixture(params=_BACKENDS)
async def index(
    request: pytest.FixtureRequest, fresh_database_url: str
) -> AsyncIterator[VectorIndex]:
    if request.param in ("pgvector", "pgvector-hnsw"):
        pool = await asyncpg.create_pool(fresh_database_url, min_size=1, max_size=2)
        try:
            async with pool.acquire() as conn:
                await apply_migrations(conn)
            yield PgVectorIndex(pool, DIM, Hnsw() if request.param == "pgvector-hnsw" else None)
        finally:
            await pool.close()
    elif request.param == "tigergraph-real":
        env = os.environ
        idx = TigerGraphIndex(
            env["TG_HOST"],
            env.get("TG_GRAPH", "MemoryContractTest"),
            token=env.get("TG_TOKEN"),
            gsql_secret=env.get("TG_GSQL_SECRET"),
            username=env.get("TG_USERNAME"),
            password=env.get("TG_PASSWORD"),
            dimension=DIM,
            timeout_s=60,
        )
        await install_schema(idx.conn_args, DIM)
        try:
            yield idx
        finally:
            await idx.aclose()
    else:
        with serve_tigergraph() as tg:
            idx = TigerGraphIndex(
                tg.url, tg.state.graph, token="good-token", dimension=DIM, timeout_s=10
            )
            assert await install_schema(idx.conn_args, DIM)
            try:
                yield idx
            finally:
                await idx.aclose()


def scope() -> str:
    return uuid.uuid4().hex


async def test_search_orders_by_cosine(index: VectorIndex) -> None:
    s = scope()
    a, b, c = rec(s, unit(1)), rec(s, unit(1, 1)), rec(s, unit(0, 1))
    await index.upsert([c, a, b])
    hits = await index.search(s, unit(1, 0.1), 3, AsOf())
    assert [h.version_id for h in hits] == [a.version_id, b.version_id, c.version_id]
    assert hits[0].cosine == pytest.approx(_cos(unit(1), unit(1, 0.1)), abs=1e-5)
    assert all(-1.0 <= h.cosine <= 1.0 + 1e-6 for h in hits)
    top1 = await index.search(s, unit(1, 0.1), 1, AsOf())
    assert [h.version_id for h in top1] == [a.version_id]


def _cos(x: list[float], y: list[float]) -> float:
    return sum(p * q for p, q in zip(x, y, strict=True))


async def test_scope_isolation(index: VectorIndex) -> None:
    s1, s2 = scope(), scope()
    mine, theirs = rec(s1, unit(0, 1)), rec(s2, unit(1))
    await index.upsert([mine, theirs])
    hits = await index.search(s1, unit(1), 5, AsOf())
    assert [h.version_id for h in hits] == [mine.version_id]
    assert await index.count(s1) == 1
    assert await index.count(s2) == 1


async def test_as_of_filters_before_ranking(index: VectorIndex) -> None:
    s = scope()
    t_close = T0 + timedelta(days=10)
    # The closed version is the nearest one; the live replacement is farther away.
    closed = rec(s, unit(1), superseded_at=t_close)
    ended = rec(s, unit(1, 0.05), valid_to=t_close)
    live = rec(s, unit(0, 1), recorded_at=t_close, valid_from=t_close)
    await index.upsert([closed, ended, live])
    # k=1 live: a post-filter would return nothing; the pre-filter returns the live one.
    hits = await index.search(s, unit(1), 1, AsOf())
    assert [h.version_id for h in hits] == [live.version_id]
    earlier = T0 + timedelta(days=5)
    then = await index.search(s, unit(1), 5, AsOf(valid_time=earlier, transaction_time=earlier))
    assert [h.version_id for h in then] == [closed.version_id, ended.version_id]
    # Believed then, about now: `ended` is no longer valid now.
    mixed = await index.search(s, unit(1), 5, AsOf(transaction_time=earlier))
    assert [h.version_id for h in mixed] == [closed.version_id]
    # The boundary itself: superseded_at is exclusive.
    at = await index.search(s, unit(1), 5, AsOf(valid_time=t_close, transaction_time=t_close))
    assert [h.version_id for h in at] == [live.version_id]


async def test_upsert_is_idempotent_and_updates(index: VectorIndex) -> None:
    s = scope()
    r = rec(s, unit(1))
    await index.upsert([r])
    await index.upsert([r])
    assert await index.count(s) == 1
    closed = rec(s, unit(1), vid=r.version_id, superseded_at=T0 + timedelta(days=1))
    await index.upsert([closed])
    assert await index.count(s) == 1
    assert await index.search(s, unit(1), 5, AsOf()) == []


async def test_delete(index: VectorIndex) -> None:
    s = scope()
    a, b = rec(s, unit(1)), rec(s, unit(0, 1))
    await index.upsert([a, b])
    await index.delete([a.version_id, str(uuid.uuid4())])
    await index.delete([a.version_id])  # idempotent
    assert await index.count(s) == 1
    assert [h.version_id for h in await index.search(s, unit(1), 5, AsOf())] == [b.version_id]
    await index.delete([])


async def test_purge_scope(index: VectorIndex) -> None:
    s1, s2 = scope(), scope()
    await index.upsert([rec(s1, unit(1)), rec(s1, unit(0, 1)), rec(s2, unit(1))])
    await index.purge_scope(s1)
    assert await index.count(s1) == 0
    assert await index.count(s2) == 1
    await index.purge_scope(s1)


async def test_count_and_vectors(index: VectorIndex) -> None:
    s = scope()
    assert await index.count(s) == 0
    a, b = rec(s, unit(1, 2, 3)), rec(s, unit(0, 1))
    await index.upsert([a, b])
    assert await index.count(s) == 2
    missing = str(uuid.uuid4())
    got: dict[str, Any] = await index.vectors(s, [a.version_id, missing])
    assert set(got) == {a.version_id}
    assert got[a.version_id] == pytest.approx(list(a.vector), abs=1e-6)
    assert await index.vectors(s, []) == {}
    assert await index.vectors(scope(), [a.version_id]) == {}  # another scope's: left out
