"""The TigerGraph index against the loopback double: install, hiding, outage, batching."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from memory_client.schema_names import (
    MEMORY_QUERIES,
    MEMORY_VERTEX,
    hide_memory_queries,
    hide_memory_schema,
)
from memory_server.index.tigergraph import (
    TigerGraphIndex,
    TigerGraphIndexError,
    install_schema,
)
from memory_server.memory.errors import Unavailable
from memory_server.memory.ports import AsOf, VectorRecord

from tg_index import DIM, args, index
from tg_server import TGServer, TGState, serve_tigergraph


def record(scope: str) -> VectorRecord:
    now = datetime(2024, 1, 1, tzinfo=UTC)
    return VectorRecord(str(uuid.uuid4()), scope, [1.0, 0.0, 0.0, 0.0], now, None, now, None)


async def test_install_schema_is_idempotent(tg: TGServer) -> None:
    assert await install_schema(args(tg), DIM) is True
    first = list(tg.state.statements)
    assert any("ADD VERTEX MemoryEmbedding" in s for s in first)
    assert any('DIMENSION=4, METRIC="COSINE"' in s for s in first)
    assert tg.state.installed_queries == set(MEMORY_QUERIES)
    assert await install_schema(args(tg), DIM) is False
    assert tg.state.statements == first  # the second run sent no GSQL at all


async def test_install_schema_adds_only_what_is_missing(tg: TGServer) -> None:
    await install_schema(args(tg), DIM)
    tg.state.installed_queries.discard("Memory_vectors")
    before = len(tg.state.statements)
    assert await install_schema(args(tg), DIM) is True
    new = tg.state.statements[before:]
    assert all("ADD VERTEX" not in s and "VECTOR ATTRIBUTE" not in s for s in new)
    assert any("INSTALL QUERY Memory_vectors" in s for s in new)


async def test_install_refuses_other_dimension(tg: TGServer) -> None:
    await install_schema(args(tg), DIM)
    with pytest.raises(TigerGraphIndexError, match="re-embed"):
        await install_schema(args(tg), 8)


async def test_install_refuses_old_tigergraph() -> None:
    with serve_tigergraph(TGState(version="4.1.3")) as tg:
        with pytest.raises(TigerGraphIndexError, match=r">= 4\.2"):
            await install_schema(args(tg), DIM)
        assert tg.state.statements == []


async def test_install_with_gsql_secret(tg: TGServer) -> None:
    assert await install_schema(args(tg, token=None, gsql_secret="s3cret"), DIM)
    assert tg.counts["tokens"] == 1
    idx = index(tg, token=None, gsql_secret="s3cret")
    try:
        await idx.upsert([record("s")])
        assert await idx.count("s") == 1
    finally:
        await idx.aclose()


async def test_bad_token_is_not_unavailable(tg: TGServer) -> None:
    await install_schema(args(tg), DIM)
    idx = index(tg, token="wrong")
    try:
        with pytest.raises(TigerGraphIndexError):
            await idx.count("s")
    finally:
        await idx.aclose()


async def test_batches_upserts(tg: TGServer) -> None:
    await install_schema(args(tg), DIM)
    idx = index(tg)
    try:
        await idx.upsert([record("s") for _ in range(1000)])
        assert tg.counts["upserts"] <= 4
        assert await idx.count("s") == 1000
        ids = list(tg.state.vertices)
        queries_before = tg.counts["queries"]
        await idx.delete(ids[:300])
        assert tg.counts["queries"] - queries_before == 2  # 256 + 44, no per-id requests
        assert tg.counts["deletes"] == 0
        assert await idx.count("s") == 700
    finally:
        await idx.aclose()


async def test_rejected_vertices_raise(tg: TGServer) -> None:
    await install_schema(args(tg), DIM)
    idx = index(tg, dimension=3)  # the server holds 4-dimensional vectors
    try:
        bad = VectorRecord("x", "s", [1.0, 0.0, 0.0], *([datetime.now(UTC), None] * 2))
        # The memory vertex is refused; its scope vertex is not.
        with pytest.raises(TigerGraphIndexError, match="accepted 1 of 2 vertices"):
            await idx.upsert([bad])
    finally:
        await idx.aclose()


@pytest.mark.parametrize("how", ["refuse", "503"])
async def test_outage_is_unavailable_and_recovers(tg: TGServer, how: str) -> None:
    await install_schema(args(tg), DIM)
    idx = index(tg)
    try:
        await idx.upsert([record("s")])
        tg.down(how)
        with pytest.raises(Unavailable):
            await idx.upsert([record("s")])
        with pytest.raises(Unavailable):
            await idx.search("s", [1.0, 0.0, 0.0, 0.0], 3, AsOf())
        tg.up()
        await idx.upsert([record("s")])
        assert await idx.count("s") == 2
    finally:
        await idx.aclose()


async def test_timeout_is_unavailable() -> None:
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)  # accepts the connection, never answers
    try:
        port = listener.getsockname()[1]
        idx = TigerGraphIndex(
            f"http://127.0.0.1:{port}", "G", token="t", dimension=DIM, timeout_s=0.3
        )
        try:
            with pytest.raises(Unavailable, match="no answer"):
                await idx.count("s")
        finally:
            await idx.aclose()
    finally:
        listener.close()


def test_graph_name_is_validated() -> None:
    with pytest.raises(ValueError):
        TigerGraphIndex("http://127.0.0.1:1", "G; DROP ALL", token="t", dimension=DIM, timeout_s=1)


GRAPHRAG_SCHEMA = {
    "GraphName": "GraphRAG",
    "VertexTypes": [
        {
            "Name": "Document",
            "PrimaryId": {"AttributeName": "id"},
            "Attributes": [],
            "Config": {"STATS": "OUTDEGREE_BY_EDGETYPE"},
        },
        {
            "Name": "DocumentChunk",
            "PrimaryId": {"AttributeName": "id"},
            "Attributes": [],
            "EmbeddingAttributes": [{"Name": "embedding", "Dimension": 1536, "Metric": "COSINE"}],
        },
        {"Name": "Entity", "PrimaryId": {"AttributeName": "id"}, "Attributes": []},
        {"Name": "Community", "PrimaryId": {"AttributeName": "id"}, "Attributes": []},
        {
            "Name": MEMORY_VERTEX,
            "PrimaryId": {"AttributeName": "version_id"},
            "Attributes": [],
            "EmbeddingAttributes": [{"Name": "embedding", "Dimension": 384, "Metric": "COSINE"}],
        },
    ],
    "EdgeTypes": [
        {
            "Name": "HAS_CHILD",
            "FromVertexTypeName": "Document",
            "ToVertexTypeName": "DocumentChunk",
            "IsDirected": True,
        },
        {
            "Name": "CONTAINS_ENTITY",
            "FromVertexTypeName": "*",
            "ToVertexTypeName": "*",
            "IsDirected": True,
            "EdgePairs": [
                {"From": "DocumentChunk", "To": "Entity"},
                {"From": MEMORY_VERTEX, "To": "Entity"},
            ],
        },
        {
            "Name": "RELATIONSHIP",
            "FromVertexTypeName": "Entity",
            "ToVertexTypeName": "Entity",
            "IsDirected": True,
        },
        {
            "Name": "MEMORY_ABOUT",
            "FromVertexTypeName": MEMORY_VERTEX,
            "ToVertexTypeName": "Entity",
            "IsDirected": True,
        },
        {
            "Name": "IN_COMMUNITY",
            "FromVertexTypeName": "Entity",
            "ToVertexTypeName": MEMORY_VERTEX,
            "IsDirected": False,
        },
    ],
    "UDTs": [{"name": "Pair"}],
}


def test_hide_memory_schema_removes_exactly_the_memory_names() -> None:
    original = json_copy(GRAPHRAG_SCHEMA)
    hidden = hide_memory_schema(GRAPHRAG_SCHEMA)
    assert original == GRAPHRAG_SCHEMA  # input untouched
    assert MEMORY_VERTEX not in repr(hidden)
    assert [v["Name"] for v in hidden["VertexTypes"]] == [
        "Document",
        "DocumentChunk",
        "Entity",
        "Community",
    ]
    assert [e["Name"] for e in hidden["EdgeTypes"]] == [
        "HAS_CHILD",
        "CONTAINS_ENTITY",
        "RELATIONSHIP",
    ]
    contains = hidden["EdgeTypes"][1]
    assert contains["EdgePairs"] == [{"From": "DocumentChunk", "To": "Entity"}]
    assert contains["FromVertexTypeName"] == "*"
    assert hidden["VertexTypes"][1] == GRAPHRAG_SCHEMA["VertexTypes"][1]  # type: ignore[index]
    assert hidden["UDTs"] == GRAPHRAG_SCHEMA["UDTs"]
    assert hidden["GraphName"] == "GraphRAG"


def json_copy(x: object) -> object:
    import json

    return json.loads(json.dumps(x))


def test_hide_memory_queries() -> None:
    names = ["GraphRAG_search", *MEMORY_QUERIES, "Memory_of_user_query", "entity_lookup"]
    assert hide_memory_queries(names) == [
        "GraphRAG_search",
        "Memory_of_user_query",
        "entity_lookup",
    ]
    eps = [f"GET /query/GraphRAG/{q}" for q in names]
    assert hide_memory_queries(eps) == [
        "GET /query/GraphRAG/GraphRAG_search",
        "GET /query/GraphRAG/Memory_of_user_query",
        "GET /query/GraphRAG/entity_lookup",
    ]
