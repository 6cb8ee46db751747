"""The TigerGraph index against replies shaped as the real server's (issue 14, findings 6-10):
vectors printed under "Embeddings", JSON 5xx and REST++ codes, refused tokens, changed query
texts, an empty candidate set, and the vector index's rebuild lag."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

import pytest

from memory_client.schema_names import MEMORY_QUERIES, Q_SEARCH
from memory_client.v1 import memory_pb2 as pb
from memory_server.index.tigergraph import (
    TigerGraphIndexError,
    install_schema,
)
from memory_server.memory.errors import Unavailable
from memory_server.memory.ports import AsOf, VectorRecord

from conftest import ServerFactory, assert_eventually, new_id
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
        got = await idx.vectors([r.version_id for r in recs])
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
        outbox = memory.server.outbox
        assert outbox is not None
        outbox.notify()

        async def drained() -> bool:
            return (await outbox.status())[0] == 0

        await assert_eventually(drained, what="the outbox drained")
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
        ltm = memory.server.ltm
        assert ltm is not None
        assert tg.counts["query:Memory_vectors"] >= 1
        assert ltm.live_vectors_missing == 0
