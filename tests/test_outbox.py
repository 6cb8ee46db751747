"""The transactional outbox: a crash after the fact commit and before the vector upsert
converges after restart, and replays are idempotent."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest

from memory_server.embedding.minilm import MiniLMBackend
from memory_server.embedding.openai import OpenAICompatibleEmbeddings
from memory_server.embedding.pool import EmbeddingPool
from memory_server.index.pgvector import PgVectorIndex
from memory_server.memory.facts.model import Candidate, Decision, FactKind, Provenance
from memory_server.memory.facts.model import ReconciledCandidate as RC
from memory_server.memory.identity import Scope
from memory_server.memory.ports import AsOf
from memory_server.outbox.worker import OutboxWorker
from memory_server.store.facts import PostgresFactStore
from memory_server.store.schema import apply_migrations

from fake_openai import FakeEmbeddings


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    async with asyncpg.create_pool(database_url, min_size=1, max_size=4) as pool:
        async with pool.acquire() as conn:
            await apply_migrations(conn)
        yield pool


@pytest.fixture(scope="module")
async def embedder() -> AsyncIterator[EmbeddingPool]:
    async with EmbeddingPool(MiniLMBackend()) as pool:
        yield pool


async def _all_versions(pool: asyncpg.Pool, scope: Scope) -> set[str]:
    rows = await pool.fetch(
        """SELECT v.id FROM fact_versions v JOIN scopes s ON s.id = v.scope_id
           WHERE s.username = $1 AND s.graphname = $2""",
        scope.username,
        scope.graphname,
    )
    return {str(r["id"]) for r in rows}


async def test_commit_without_upsert_converges_after_restart(
    pool: asyncpg.Pool, embedder: EmbeddingPool
):
    store = PostgresFactStore(pool)
    scope = Scope(f"outbox-{uuid.uuid4().hex[:8]}", "Finance")
    add = [
        RC(Decision.ADD, Candidate(text, FactKind.PREFERENCE))
        for text in ("Prefers tea", "Likes jazz", "Works on fraud rings")
    ]
    # What the server commits before it crashes: fact rows and outbox rows, no vectors.
    changes = await store.apply(scope, add, Provenance(extractor="test"), max_live=100)
    tea, jazz, _ = (c.fact_id for c in changes)
    await store.apply(
        scope,
        [
            RC(Decision.UPDATE, Candidate("Prefers coffee", FactKind.PREFERENCE), tea),
            RC(
                Decision.DELETE, Candidate("Likes jazz", FactKind.PREFERENCE, retraction=True), jazz
            ),
        ],
        Provenance(extractor="test"),
        max_live=100,
    )
    index = PgVectorIndex(pool, embedder.dimension)
    assert await index.version_ids(scope.scope_hash) == set()

    # After the restart, a fresh outbox actor finds the rows and brings the index level.
    worker = OutboxWorker(store, index, embedder, batch_size=4)
    await worker.drain()
    versions = await _all_versions(pool, scope)
    assert await index.version_ids(scope.scope_hash) == versions
    live = {f.version_id for f in await store.live_facts(scope)}
    [vector] = await embedder.embed(["what does the user drink"])
    hits = await index.search(scope.scope_hash, vector, 10, AsOf())
    assert {h.version_id for h in hits} == live
    # This scope's rows only: the session's database also holds other tests' rows (a test
    # whose TigerGraph stand-in is gone leaves its rows waiting for their next attempt).
    pending = await pool.fetchval(
        "SELECT count(*) FROM vector_outbox WHERE scope_hash = $1", scope.scope_hash
    )
    assert pending == 0

    # A replay of every change (a crash after the upsert, before the rows were deleted).
    await pool.execute(
        "INSERT INTO vector_outbox (scope_hash, op, version_id) "
        "SELECT $1, 'upsert', unnest($2::uuid[])",
        scope.scope_hash,
        [uuid.UUID(v) for v in versions],
    )
    await worker.drain()
    assert await index.version_ids(scope.scope_hash) == versions
    assert await index.count(scope.scope_hash) == len(versions)


async def test_thousand_changes_take_few_index_requests(
    pool: asyncpg.Pool, embedder: EmbeddingPool
):
    store = PostgresFactStore(pool)
    scope = Scope(f"outbox-bulk-{uuid.uuid4().hex[:8]}", "Finance")
    await store.apply(
        scope,
        [
            RC(Decision.ADD, Candidate(f"Fact number {i} about account {i * 7}", FactKind.OTHER))
            for i in range(1000)
        ],
        Provenance(extractor="test"),
        max_live=1000,
    )
    index = PgVectorIndex(pool, embedder.dimension)
    worker = OutboxWorker(store, index, embedder, batch_size=256)
    sent_before = worker.sent
    batches = 0
    while await worker.send_one_batch():
        batches += 1
    assert worker.sent - sent_before >= 1000
    assert batches <= 20, batches
    assert await index.count(scope.scope_hash) == 1000


async def test_failed_batches_back_off_then_converge(
    fresh_database_url: str, fake_embeddings: FakeEmbeddings
):
    """The embedding endpoint fails: nothing is lost, the batch waits its back-off, and the
    index converges once the endpoint answers again."""
    async with asyncpg.create_pool(fresh_database_url, min_size=1, max_size=4) as pool:
        async with pool.acquire() as conn:
            await apply_migrations(conn)
        store = PostgresFactStore(pool)
        scope = Scope("outbox-retry", "Finance")
        await store.apply(
            scope,
            [RC(Decision.ADD, Candidate(f"Fact {i}", FactKind.OTHER)) for i in range(3)],
            Provenance(extractor="test"),
            max_live=100,
        )
        backend = OpenAICompatibleEmbeddings(
            base_url=fake_embeddings.base_url,
            model="embed-test",
            api_key=None,
            dimension=fake_embeddings.dimension,
            timeout_s=5.0,
        )
        async with EmbeddingPool(backend) as embedder:
            index = PgVectorIndex(pool, embedder.dimension)
            worker = OutboxWorker(store, index, embedder, max_backoff_s=60)
            fake_embeddings.mode = "status500"
            assert await worker.send_one_batch() == 0
            assert worker.failures == 1
            rows = await pool.fetch(
                "SELECT attempts, next_attempt_at > now() AS waiting FROM vector_outbox"
            )
            assert [(r["attempts"], r["waiting"]) for r in rows] == [(1, True)] * 3
            assert await worker.send_one_batch() == 0  # backing off: nothing is due yet
            assert worker.failures == 1

            fake_embeddings.mode = "ok"
            await pool.execute("UPDATE vector_outbox SET next_attempt_at = now()")  # time passes
            assert await worker.send_one_batch() == 3
            assert await index.count(scope.scope_hash) == 3
            assert (await store.backlog()).waiting == 0
