"""The memory index beside GraphRAG's own schema in one graph, and scope-local queries (issue 27):

- after our install GraphRAG's own check (`"- embedding(Dimension=" in ls`, supportai.py) still
  says its vector schema is missing, so it installs it; and our install works beside it and
  leaves its types and data alone;
- every memory vertex hangs off its scope's MemoryScope vertex, and search, count and purge
  start there: at 1,000 scopes one scope's calls touch that scope's vertices only, where the
  queries of the release before touched every memory vertex of every scope."""

from __future__ import annotations

import copy
import random
import uuid
from collections import Counter
from datetime import UTC, datetime

import pytest

from memory_client.schema_names import (
    MEMORY_EDGES,
    MEMORY_SCOPE_EDGE,
    MEMORY_SCOPE_VERTEX,
    MEMORY_VERTEX,
    MEMORY_VERTICES,
)
from memory_server.index.tigergraph import install_schema
from memory_server.memory.ports import AsOf, LinkRecord, VectorRecord

from tg_index import DIM, args, gsql, index, install_legacy, upsert, upsert_legacy
from tg_server import TGServer

T0 = datetime(2024, 1, 1, tzinfo=UTC)
# What GraphRAG looks for in `ls` (graphrag/app/supportai/supportai.py, cc4eed1).
GRAPHRAG_HAS_VECTORS = "- embedding(Dimension="
GRAPHRAG_HAS_SCHEMA = "- VERTEX ResolvedEntity"

# Part of GraphRAG's common/gsql/supportai/SupportAI_Schema.gsql and
# SupportAI_Schema_Native_Vector.gsql, as supportai.py sends them (`USE GRAPH g\n<file>\nRUN
# SCHEMA_CHANGE JOB ...`, with its dimension put in for 1536).
GRAPHRAG_SCHEMA = """CREATE SCHEMA_CHANGE JOB add_supportai_schema {
    ADD VERTEX DocumentChunk(PRIMARY_ID id STRING, idx INT, epoch_added UINT, epoch_processing UINT, epoch_processed UINT) WITH STATS="OUTDEGREE_BY_EDGETYPE", PRIMARY_ID_AS_ATTRIBUTE="true";
    ADD VERTEX Document(PRIMARY_ID id STRING, epoch_added UINT, epoch_processing UINT, epoch_processed UINT) WITH STATS="OUTDEGREE_BY_EDGETYPE", PRIMARY_ID_AS_ATTRIBUTE="true";
    ADD VERTEX Entity(PRIMARY_ID id STRING, definition STRING, description SET<STRING>, entity_type STRING, epoch_added UINT, epoch_processing UINT, epoch_processed UINT) WITH STATS="OUTDEGREE_BY_EDGETYPE", PRIMARY_ID_AS_ATTRIBUTE="true";
    ADD DIRECTED EDGE CONTAINS_ENTITY(FROM DocumentChunk, TO Entity|FROM Document, TO Entity) WITH REVERSE_EDGE="reverse_CONTAINS_ENTITY";
    ADD DIRECTED EDGE HAS_CHILD(FROM Document, TO DocumentChunk) WITH REVERSE_EDGE="reverse_HAS_CHILD";
    ADD VERTEX Community (PRIMARY_ID id STRING, iteration UINT, description STRING) WITH STATS="OUTDEGREE_BY_EDGETYPE", PRIMARY_ID_AS_ATTRIBUTE="true";
    ADD VERTEX ResolvedEntity(PRIMARY_ID id STRING, entity_type STRING) WITH STATS="OUTDEGREE_BY_EDGETYPE", PRIMARY_ID_AS_ATTRIBUTE="true";
    ADD DIRECTED EDGE RESOLVES_TO(FROM Entity, TO ResolvedEntity, relation_type STRING) WITH REVERSE_EDGE="reverse_RESOLVES_TO";
    ADD DIRECTED EDGE IN_COMMUNITY(FROM ResolvedEntity, TO Community) WITH REVERSE_EDGE="reverse_IN_COMMUNITY";
}"""  # noqa: E501
GRAPHRAG_VECTORS = """CREATE SCHEMA_CHANGE JOB add_supportai_vector {
    ALTER VERTEX DocumentChunk ADD VECTOR ATTRIBUTE embedding(dimension=8, metric="cosine");
    ALTER VERTEX Document ADD VECTOR ATTRIBUTE embedding(dimension=8, metric="cosine");
    ALTER VERTEX Entity ADD VECTOR ATTRIBUTE embedding(dimension=8, metric="cosine");
    ALTER VERTEX Community ADD VECTOR ATTRIBUTE embedding(dimension=8, metric="cosine");
    ALTER VERTEX ResolvedEntity ADD VECTOR ATTRIBUTE embedding(dimension=8, metric="cosine");
}"""
GRAPHRAG_TYPES = ("DocumentChunk", "Document", "Entity", "Community", "ResolvedEntity")


def ls(tg: TGServer) -> str:
    return gsql(tg, f"USE GRAPH {tg.state.graph}\n ls")  # GraphRAG's own statement


def install_graphrag_schema(tg: TGServer) -> None:
    """What GraphRAG's supportai.py does when its checks find nothing."""
    g = tg.state.graph
    current = ls(tg)
    for present, job, text in (
        (GRAPHRAG_HAS_SCHEMA, "add_supportai_schema", GRAPHRAG_SCHEMA),
        (GRAPHRAG_HAS_VECTORS, "add_supportai_vector", GRAPHRAG_VECTORS),
    ):
        if present not in current:
            out = gsql(tg, f"USE GRAPH {g}\n{text}\nRUN SCHEMA_CHANGE JOB {job}")
            assert "Local schema change succeeded." in out, out


def record(scope: str, rng: random.Random) -> VectorRecord:
    vector = [rng.uniform(-1, 1) for _ in range(DIM)]
    return VectorRecord(str(uuid.uuid4()), scope, vector, T0, None, T0, None)


async def test_after_our_install_graphrag_still_installs_its_vector_schema(tg: TGServer) -> None:
    assert await install_schema(args(tg), DIM) is True
    listing = ls(tg)
    assert GRAPHRAG_HAS_VECTORS not in listing  # GraphRAG would install its own
    assert GRAPHRAG_HAS_SCHEMA not in listing
    # Our types, in TigerGraph's `ls` layout.
    assert "  - VERTEX MemoryEmbedding(PRIMARY_ID version_id STRING, scope_hash STRING," in listing
    assert "  - VERTEX MemoryScope(PRIMARY_ID scope_hash STRING) WITH STATS=" in listing
    assert "  - DIRECTED EDGE MemoryOfScope(FROM MemoryScope, TO MemoryEmbedding)" in listing
    vectors = listing.split("Vector Embeddings:\n", 1)[1]
    assert vectors.startswith(
        '  - MemoryEmbedding:\n    - memory_vector(Dimension=4, IndexType="HNSW", '
        'DataType="FLOAT", Metric="COSINE")\n'
    )

    install_graphrag_schema(tg)
    listing = ls(tg)
    assert GRAPHRAG_HAS_VECTORS in listing and GRAPHRAG_HAS_SCHEMA in listing
    assert '  - DocumentChunk:\n    - embedding(Dimension=8, IndexType="HNSW"' in listing
    statements = len(tg.state.statements)
    assert await install_schema(args(tg), DIM) is False  # ours are all still there
    assert len(tg.state.statements) == statements


async def test_our_install_beside_graphrag_leaves_its_types_alone(tg: TGServer) -> None:
    install_graphrag_schema(tg)
    chunk = {"idx": {"value": 0}, "embedding": {"value": [0.5] * 8}}
    reply = upsert(tg, {"vertices": {"DocumentChunk": {"doc1_chunk0": chunk}}})
    assert reply["accepted_vertices"] == 1
    catalog = tg.state.catalog
    theirs = copy.deepcopy(
        ({n: catalog.vertex_types[n] for n in GRAPHRAG_TYPES}, dict(catalog.edge_types))
    )
    data = copy.deepcopy(tg.state.store)
    before = len(tg.state.statements)

    assert await install_schema(args(tg), DIM) is True
    ours = tg.state.statements[before:]
    assert not [s for s in ours for name in GRAPHRAG_TYPES if name in s]
    assert {n: catalog.vertex_types[n] for n in GRAPHRAG_TYPES} == theirs[0]
    assert {n: e for n, e in catalog.edge_types.items() if n in theirs[1]} == theirs[1]
    assert set(catalog.vertex_types) - set(GRAPHRAG_TYPES) == set(MEMORY_VERTICES)
    assert set(catalog.edge_types) - set(theirs[1]) == set(MEMORY_EDGES)
    assert tg.state.store == data
    listing = ls(tg)
    assert listing.count(GRAPHRAG_HAS_VECTORS) == len(GRAPHRAG_TYPES)
    assert "    - memory_vector(Dimension=4" in listing

    idx = index(tg)
    try:
        rec = record("s", random.Random(1))
        await idx.upsert([rec])
        hits = await idx.search("s", list(rec.vector), 3, AsOf())
        assert [h.version_id for h in hits] == [rec.version_id]
    finally:
        await idx.aclose()
    assert tg.state.store["DocumentChunk"] == data["DocumentChunk"]


async def test_every_memory_vertex_hangs_off_its_scope(tg: TGServer) -> None:
    await install_schema(args(tg), DIM)
    rng = random.Random(2)
    mine, theirs = [record("a", rng) for _ in range(3)], [record("b", rng) for _ in range(2)]
    link = LinkRecord(mine[0].version_id, mine[1].version_id, 0.9, T0, None)
    idx = index(tg)
    try:
        await idx.upsert([*mine, *theirs], [link])
        assert tg.counts["upserts"] == 1  # vertices, scopes, their edges and links at once
        assert set(tg.state.store[MEMORY_SCOPE_VERTEX]) == {"a", "b"}
        assert set(tg.state.edge_store[MEMORY_SCOPE_EDGE]) == {
            (r.scope_hash, r.version_id) for r in [*mine, *theirs]
        }
        assert len(tg.state.edges) == 1
        assert await idx.count("a") == 3
        # The queries reach memory vertices by the edge only.
        del tg.state.edge_store[MEMORY_SCOPE_EDGE][("a", mine[2].version_id)]
        assert await idx.count("a") == 2
        hits = await idx.search("a", list(mine[2].vector), 3, AsOf())
        assert mine[2].version_id not in {h.version_id for h in hits}
        await idx.upsert([mine[2]])  # the outbox's retry puts it back
        assert await idx.count("a") == 3
        # Purge takes the scope's vertex, its memory vertices and their edges.
        await idx.purge_scope("a")
        assert set(tg.state.store[MEMORY_SCOPE_VERTEX]) == {"b"}
        assert set(tg.state.vertices) == {r.version_id for r in theirs}
        assert {s for s, _ in tg.state.edge_store[MEMORY_SCOPE_EDGE]} == {"b"}
        assert tg.state.edges == {}
        assert await idx.count("a") == 0 and await idx.count("b") == 2
        assert await idx.search("a", list(mine[0].vector), 3, AsOf()) == []
    finally:
        await idx.aclose()


SCOPES = 1000
PER_SCOPE = 3


async def _touched_by_one_scope(tg: TGServer, scope: str, vector: list[float]) -> Counter[str]:
    """The vertices one scope's search, count and purge touched, by query."""
    before = Counter(tg.touched)
    idx = index(tg)
    try:
        assert len(await idx.search(scope, vector, 5, AsOf())) == PER_SCOPE
        assert await idx.count(scope) == PER_SCOPE
        await idx.purge_scope(scope)
        assert await idx.count(scope) == 0
    finally:
        await idx.aclose()
    return Counter({q: n - before[q] for q, n in tg.touched.items() if n - before[q]})


def assert_only_the_scope_touched(touched: Counter[str]) -> None:
    # The scope's vertex and its memory vertices (a count after the purge touches nothing).
    limit = 1 + PER_SCOPE
    assert touched["Memory_search"] <= limit, touched
    assert touched["Memory_count_scope"] <= limit, touched
    assert touched["Memory_purge_scope"] <= limit, touched


async def test_one_scope_touches_only_its_vertices_at_a_thousand_scopes(tg: TGServer) -> None:
    rng = random.Random(5)
    recs = [record(f"scope-{i:04d}", rng) for i in range(SCOPES) for _ in range(PER_SCOPE)]
    # The release before: every call starts from every memory vertex of every scope.
    install_legacy(tg, DIM)
    upsert_legacy(tg, recs)
    old = await _touched_by_one_scope(tg, "scope-0007", list(recs[7 * PER_SCOPE].vector))
    assert old == Counter(
        {
            "Memory_search": SCOPES * PER_SCOPE,
            "Memory_count_scope": 2 * SCOPES * PER_SCOPE - PER_SCOPE,  # before and after
            "Memory_purge_scope": SCOPES * PER_SCOPE,
        }
    )
    with pytest.raises(AssertionError):
        assert_only_the_scope_touched(old)

    # Migrated (every vertex gets its scope vertex and edge), the same calls for another scope.
    assert await install_schema(args(tg), DIM) is True
    assert len(tg.state.store[MEMORY_SCOPE_VERTEX]) == SCOPES - 1
    new = await _touched_by_one_scope(tg, "scope-0042", list(recs[42 * PER_SCOPE].vector))
    assert new == Counter(
        {"Memory_search": 1 + PER_SCOPE, "Memory_count_scope": 1 + PER_SCOPE,
         "Memory_purge_scope": 1 + PER_SCOPE}
    )  # fmt: skip
    assert_only_the_scope_touched(new)
    assert len(tg.state.vertices) == (SCOPES - 2) * PER_SCOPE

    # And through today's upsert, not the migration: the same for a scope written now.
    idx = index(tg)
    try:
        fresh = [record("scope-new", rng) for _ in range(PER_SCOPE)]
        await idx.upsert(fresh)
    finally:
        await idx.aclose()
    assert_only_the_scope_touched(
        await _touched_by_one_scope(tg, "scope-new", list(fresh[0].vector))
    )
    assert tg.state.vertices.keys().isdisjoint(r.version_id for r in fresh)
    assert MEMORY_VERTEX in tg.state.catalog.vertex_types
