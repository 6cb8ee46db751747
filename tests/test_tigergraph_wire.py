"""The TigerGraph index against replies shaped as the real server's (issue 14, findings 6-10):
vectors printed under "Embeddings", JSON 5xx and REST++ codes, refused tokens, changed query
texts, an empty candidate set, and the vector index's rebuild lag."""

from __future__ import annotations

import asyncio
import random
import uuid
from datetime import UTC, datetime

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from memory_client.schema_names import MEMORY_QUERIES, Q_SEARCH
from memory_client.v1 import memory_pb2 as pb
from memory_server.index.tigergraph import (
    TigerGraphIndexError,
    install_schema,
)
from memory_server.memory.errors import Unavailable
from memory_server.memory.ports import AsOf, VectorRecord

from conftest import RunningServer, ServerFactory, assert_eventually, new_id
from tg_index import DIM, args, index, server_settings
from tg_server import TGServer, serve_tigergraph


def record(scope: str, vector: list[float] | None = None) -> VectorRecord:
    now = datetime(2024, 1, 1, tzinfo=UTC)
    vec = vector or [1.0, 0.0, 0.0, 0.0]
    return VectorRecord(str(uuid.uuid4()), scope, vec, now, None, now, None)


async def test_vectors_are_read_from_embeddings(tg: TGServer) -> None:
    # Finding 6: `PRINT s WITH VECTOR` puts them under "Embeddings" (ecosys q3.out).
    await install_schema(args(tg), DIM)
    idx = index(tg)
    try:
        recs = [record("s", [1.0, 2.0, 3.0, 4.0]), record("s", [0.0, 1.0, 0.0, 0.0])]
        await idx.upsert(recs)
        got = await idx.vectors("s", [r.version_id for r in recs])
        assert got == {r.version_id: list(r.vector) for r in recs}
        assert idx.vectors_missing == 0
    finally:
        await idx.aclose()


@pytest.mark.parametrize("how", ["json503", "query_timeout"])
async def test_json_server_errors_are_unavailable(tg: TGServer, how: str) -> None:
    # Finding 7: a JSON 5xx body, and REST-3002 (query timeout), are retryable.
    await install_schema(args(tg), DIM)
    idx = index(tg)
    try:
        tg.down(how)
        with pytest.raises(Unavailable):
            await idx.count("s")
        with pytest.raises(Unavailable):
            await idx.search("s", [1.0, 0.0, 0.0, 0.0], 3, AsOf())
        tg.up()
        assert await idx.count("s") == 0
    finally:
        await idx.aclose()


async def test_install_during_json_503_is_unavailable(tg: TGServer) -> None:
    tg.down("json503")
    with pytest.raises(Unavailable):
        await install_schema(args(tg), DIM)


async def test_expired_token_is_refreshed_with_the_secret(tg: TGServer) -> None:
    # Finding 9: a configured token that expires is replaced from the secret.
    await install_schema(args(tg), DIM)
    idx = index(tg, gsql_secret="s3cret")
    try:
        await idx.upsert([record("s")])
        tg.expire_tokens()
        assert await idx.count("s") == 1
        assert tg.counts["tokens"] == 1
    finally:
        await idx.aclose()


async def test_expired_token_is_refreshed_with_username_and_password(tg: TGServer) -> None:
    # Finding 9, the other credential: POST /gsql/v1/tokens with the user's Basic auth.
    await install_schema(args(tg), DIM)
    idx = index(tg, username="tigergraph", password="tg-password")
    try:
        await idx.upsert([record("s")])
        tg.expire_tokens()
        assert await idx.count("s") == 1
        assert tg.counts["tokens_by_password"] == 1
        assert tg.counts["tokens_by_secret"] == 0
    finally:
        await idx.aclose()
    # Without a token configured, one is fetched with the password before the first query.
    fresh = index(tg, token=None, username="tigergraph", password="tg-password")
    try:
        assert await fresh.count("s") == 1
        assert tg.counts["tokens_by_password"] == 2
    finally:
        await fresh.aclose()
    # A wrong password is a clear, permanent error, not a retry loop.
    wrong = index(tg, username="tigergraph", password="not-it")
    try:
        tg.expire_tokens()
        with pytest.raises(TigerGraphIndexError):
            await wrong.count("s")
    finally:
        await wrong.aclose()


async def test_expired_token_without_credentials_says_so(tg: TGServer) -> None:
    await install_schema(args(tg), DIM)
    idx = index(tg)
    try:
        tg.expire_tokens()
        with pytest.raises(TigerGraphIndexError, match="no gsql_secret"):
            await idx.count("s")
    finally:
        await idx.aclose()


async def test_changed_query_text_is_reinstalled(tg: TGServer) -> None:
    # Finding 9: a query installed under the right name but from an older text.
    await install_schema(args(tg), DIM)
    old = "CREATE OR REPLACE QUERY Memory_count_scope(STRING scope) { PRINT 0 AS n; }"
    tg.state.installed_texts["Memory_count_scope"] = old
    before = len(tg.state.statements)
    assert await install_schema(args(tg), DIM) is True
    new = tg.state.statements[before:]
    assert any("INSTALL QUERY" in s and "Memory_count_scope" in s for s in new)
    assert tg.state.installed_queries == set(MEMORY_QUERIES)
    assert await install_schema(args(tg), DIM) is False


async def test_empty_scope_never_searches_everything(tg: TGServer) -> None:
    # Finding 10: whatever vectorSearch does with an empty candidate set, a scope with no
    # vectors finds nothing of another scope.
    await install_schema(args(tg), DIM)
    assert "r = SELECT v FROM r:v" in tg.state.installed_texts[Q_SEARCH]
    idx = index(tg)
    try:
        await idx.upsert([record("other")])
        assert await idx.search("empty", [1.0, 0.0, 0.0, 0.0], 5, AsOf()) == []
        # Fewer candidates than k: only those come back.
        assert len(await idx.search("other", [1.0, 0.0, 0.0, 0.0], 5, AsOf())) == 1
    finally:
        await idx.aclose()


async def _indexed(memory: RunningServer) -> None:
    """Wakes the outbox and waits until it has sent every queued change to the stand-in."""
    outbox = memory.server.outbox
    assert outbox is not None
    outbox.facts_changed()

    async def drained() -> bool:
        return (await outbox.backlog()).waiting == 0

    await assert_eventually(drained, what="the outbox drained")


async def test_approximate_search_returns_ranked_hits_of_the_scope(tg: TGServer) -> None:
    # vectorSearch is approximate (HNSW): hits may miss true neighbours, but each hit is of the
    # scope and the order is by score.
    await install_schema(args(tg), DIM)
    tg.state.ann_recall = 0.5
    idx = index(tg)
    rng = random.Random(7)
    try:
        records = [record("s", [rng.uniform(-1, 1) for _ in range(DIM)]) for _ in range(40)]
        await idx.upsert([*records, record("other")])
        query = [1.0, 0.5, 0.0, 0.0]
        hits = await idx.search("s", query, 10, AsOf())
        ids = {r.version_id for r in records}
        assert 0 < len(hits) <= 10
        assert {h.version_id for h in hits} <= ids
        scores = [h.cosine for h in hits]
        assert scores == sorted(scores, reverse=True)
        tg.state.ann_recall = 1.0
        exact = await idx.search("s", query, 10, AsOf())
        assert len(exact) == 10 and exact[0].cosine >= hits[0].cosine
    finally:
        await idx.aclose()


async def test_a_fact_the_ann_misses_is_still_recalled_by_its_words(
    start_server: ServerFactory, scope: dict[str, str]
) -> None:
    with serve_tigergraph() as tg:
        tg.state.ann_recall = 0.0  # the worst case: the vector leg finds nothing
        memory = await start_server(fact_extract_async=False, **server_settings(tg))
        stub = memory.stub
        await stub.AddFact(pb.AddFactRequest(**scope, text="Prefers window seats on long flights"))
        await _indexed(memory)
        found = await stub.SearchFacts(pb.SearchFactsRequest(**scope, query="window seats"))
        assert [r.fact.text for r in found.results] == ["Prefers window seats on long flights"]
        assert found.results[0].vector_score == 0
        assert found.results[0].lexical_score > 0


async def test_index_lag_is_reported_and_awaited(tg: TGServer) -> None:
    # Finding 8: upserted vectors are searchable only after the HNSW rebuild.
    await install_schema(args(tg), DIM)
    tg.state.index_lag_s = 0.6
    idx = index(tg)
    try:
        r = record("s")
        await idx.upsert([r])
        assert idx.upserts_pending_index == 1
        assert await idx.vector_status() is False
        assert await idx.search("s", [1.0, 0.0, 0.0, 0.0], 3, AsOf()) == []
        assert await idx.wait_searchable(5.0, poll_s=0.1) is True
        assert idx.upserts_pending_index == 0
        hits = await idx.search("s", [1.0, 0.0, 0.0, 0.0], 3, AsOf())
        assert [h.version_id for h in hits] == [r.version_id]
        assert tg.counts["vector_status"] >= 2
    finally:
        await idx.aclose()


async def test_concurrent_calls_keep_their_own_statuses(tg: TGServer) -> None:
    await install_schema(args(tg), DIM)
    idx = index(tg)
    try:
        counts = await asyncio.gather(*(idx.count("s") for _ in range(8)))
        assert counts == [0] * 8
    finally:
        await idx.aclose()


async def test_server_starts_when_install_gets_a_json_503_and_installs_later(
    start_server: ServerFactory,
) -> None:
    # Finding 7 at start: a JSON 5xx during install_schema (a TigerGraphException, not an
    # aiohttp error) no longer stops the server; the install is retried in the background.
    with serve_tigergraph() as tg:
        tg.down("json503")
        memory = await start_server(
            fact_extract_async=False,
            **server_settings(tg),
            request_timeout_seconds=5,
        )
        assert memory.server.port
        tg.up()

        async def installed() -> bool:
            return tg.state.installed_queries == set(MEMORY_QUERIES)

        await assert_eventually(installed, timeout_s=30, what="the background install")


async def test_learning_reuses_the_indexed_vectors_of_live_facts(
    start_server: ServerFactory, scope: dict[str, str]
) -> None:
    # Finding 6 through the server: once the live facts are indexed, a learning pass reads
    # their vectors back from TigerGraph instead of silently embedding them again.
    with serve_tigergraph() as tg:
        memory = await start_server(
            fact_extract_async=False,
            **server_settings(tg),
        )
        stub = memory.stub
        await stub.AddFact(pb.AddFactRequest(**scope, text="Prefers concise answers"))
        await _indexed(memory)
        conversation = new_id()
        started = await stub.StartTurn(
            pb.StartTurnRequest(
                **scope, conversation_id=conversation, content="My favourite colour is amber."
            )
        )
        await stub.CompleteTurn(
            pb.CompleteTurnRequest(
                **scope,
                conversation_id=conversation,
                content="Noted.",
                parent_id=started.message.message_id,
            )
        )
        assert tg.counts["query:Memory_vectors"] >= 1
        registry = memory.server.metrics.registry
        assert registry.get_sample_value("graphrag_memory_live_vectors_missing_total") == 0


async def _metric(memory: RunningServer, name: str) -> float:
    url = f"http://127.0.0.1:{memory.server.metrics_port}/metrics"
    async with httpx.AsyncClient() as http:
        reply = await http.get(url)
    for family in text_string_to_metric_families(reply.text):
        for sample in family.samples:
            if sample.name in (name, name + "_total"):
                return float(sample.value)
    raise AssertionError(f"{name} not on /metrics")


async def test_metrics_show_the_index_lag_and_missing_vectors(
    start_server: ServerFactory, scope: dict[str, str]
) -> None:
    # Findings 6 and 8 where an operator looks: /metrics shows vectors TigerGraph has not yet
    # made searchable (each scrape asks GET /restpp/vector/status) and the live facts whose
    # vectors learning could not read back.
    with serve_tigergraph() as tg:
        # Long enough that the first scrape comes before the rebuild on a loaded machine.
        tg.state.index_lag_s = 5.0
        memory = await start_server(
            fact_extract_async=False, metrics_address="127.0.0.1:0", **server_settings(tg)
        )
        stub = memory.stub
        await stub.AddFact(pb.AddFactRequest(**scope, text="Prefers concise answers"))
        await _indexed(memory)
        # At least the fact's vector (a retried batch upserts it again).
        assert await _metric(memory, "graphrag_memory_vector_index_pending") >= 1
        assert await _metric(memory, "graphrag_memory_vector_index_lag_seconds") > 0

        async def rebuilt() -> bool:
            return await _metric(memory, "graphrag_memory_vector_index_pending") == 0

        await assert_eventually(rebuilt, timeout_s=20, what="the index rebuilt")
        assert await _metric(memory, "graphrag_memory_vector_index_lag_seconds") == 0
        registry = memory.server.metrics.registry
        assert registry.get_sample_value("graphrag_memory_live_vectors_missing_total") == 0

        # TigerGraph down during a learning pass: the live fact's vector cannot be read back,
        # so it is embedded again, and counted.
        tg.down("json503")
        conversation = new_id()
        started = await stub.StartTurn(
            pb.StartTurnRequest(
                **scope, conversation_id=conversation, content="My favourite colour is amber."
            )
        )
        await stub.CompleteTurn(
            pb.CompleteTurnRequest(
                **scope,
                conversation_id=conversation,
                content="Noted.",
                parent_id=started.message.message_id,
            )
        )
        # At least once: learning retries a pass that met an unavailable index.
        assert await _metric(memory, "graphrag_memory_live_vectors_missing") >= 1
        tg.up()
