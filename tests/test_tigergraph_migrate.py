"""A graph of the release before issue 27 (vector attribute `embedding` on MemoryEmbedding, no
scope vertices) is moved onto today's names by install_schema: every vector copied as it is,
every memory vertex linked to its scope's vertex, the old attribute dropped, nothing embedded
again; safely re-run after a stop midway; refused, untouched, for another dimension."""

from __future__ import annotations

import asyncio
import random
import uuid
from datetime import UTC, datetime
from http import HTTPStatus

import pytest

from memory_client.schema_names import (
    JOB_DROP_LEGACY_VECTOR,
    LEGACY_VECTOR_ATTRIBUTE,
    MEMORY_SCOPE_EDGE,
    MEMORY_SCOPE_VERTEX,
    MEMORY_VECTOR_ATTRIBUTE,
    MEMORY_VERTEX,
)
from memory_client.v1 import memory_pb2 as pb
from memory_server.index.tigergraph import TigerGraphIndexError, install_schema
from memory_server.memory.errors import Unavailable
from memory_server.memory.ports import AsOf, VectorRecord

from conftest import ServerFactory, outbox_caught_up
from tg_index import DIM, args, gsql, index, install_legacy, server_settings, upsert_legacy
from tg_server import TGServer, _Handler, serve_tigergraph

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def records(n: int, scopes: list[str], seed: int = 3) -> list[VectorRecord]:
    rng = random.Random(seed)
    return [
        VectorRecord(
            str(uuid.uuid4()),
            scopes[i % len(scopes)],
            [rng.uniform(-1, 1) for _ in range(DIM)],
            T0,
            None,
            T0,
            None,
        )
        for i in range(n)
    ]


def vectors(tg: TGServer, attr: str) -> dict[str, list[float]]:
    return {vid: v[attr] for vid, v in tg.state.vertices.items() if attr in v}


def legacy_graph(tg: TGServer, n: int = 1200, scopes: int = 7) -> list[VectorRecord]:
    install_legacy(tg, DIM)
    recs = records(n, [f"scope-{i}" for i in range(scopes)])
    upsert_legacy(tg, recs)
    return recs


def assert_migrated(tg: TGServer, recs: list[VectorRecord]) -> None:
    catalog = tg.state.catalog
    memory = catalog.vertex_types[MEMORY_VERTEX]
    assert set(memory.vectors) == {MEMORY_VECTOR_ATTRIBUTE}
    assert vectors(tg, MEMORY_VECTOR_ATTRIBUTE) == {r.version_id: list(r.vector) for r in recs}
    assert vectors(tg, LEGACY_VECTOR_ATTRIBUTE) == {}
    assert set(tg.state.store[MEMORY_SCOPE_VERTEX]) == {r.scope_hash for r in recs}
    assert set(tg.state.edge_store[MEMORY_SCOPE_EDGE]) == {
        (r.scope_hash, r.version_id) for r in recs
    }
    assert catalog.jobs == {}


async def test_migration_copies_every_vector_and_embeds_nothing(tg: TGServer) -> None:
    recs = legacy_graph(tg)
    before = vectors(tg, LEGACY_VECTOR_ATTRIBUTE)
    assert len(before) == 1200
    assert await install_schema(args(tg), DIM) is True
    assert_migrated(tg, recs)
    assert vectors(tg, MEMORY_VECTOR_ATTRIBUTE) == before
    # Pages of 500: three for the copy, three for the pass that finds nothing left.
    assert tg.counts["query:Memory_scan_page"] == 6
    # Each scope answers from its own vertex, with the vectors it had.
    idx = index(tg)
    try:
        for scope in {r.scope_hash for r in recs}:
            mine = [r for r in recs if r.scope_hash == scope]
            assert await idx.count(scope) == len(mine)
            best = max(mine, key=lambda r: r.vector[0] / sum(x * x for x in r.vector) ** 0.5)
            hits = await idx.search(scope, [1.0, 0.0, 0.0, 0.0], 1, AsOf())
            assert [h.version_id for h in hits] == [best.version_id]
        first = recs[0].scope_hash
        mine = [r for r in recs if r.scope_hash == first]
        got = await idx.vectors(first, [r.version_id for r in recs[:10]])
        assert got == {r.version_id: list(r.vector) for r in recs[:10] if r in mine}
    finally:
        await idx.aclose()
    statements = len(tg.state.statements)
    assert await install_schema(args(tg), DIM) is False
    assert len(tg.state.statements) == statements


async def test_migration_resumes_after_a_stop_midway() -> None:
    class FailingSecondCopy(_Handler):
        """TigerGraph going away in the middle of the copy: the second page's vectors."""

        copies = 0

        def _dispatch(self, method: str) -> None:
            if "update_vertex_only=true" in self.path:
                type(self).copies += 1
                if type(self).copies == 2:
                    self._body()
                    self._send(HTTPStatus.SERVICE_UNAVAILABLE, "Service Unavailable", text=True)
                    return
            super()._dispatch(method)

    with serve_tigergraph(handler=FailingSecondCopy) as tg:
        recs = legacy_graph(tg)
        with pytest.raises(Unavailable):
            await install_schema(args(tg), DIM)
        # Stopped with both vector attributes present and a page copied.
        memory = tg.state.catalog.vertex_types[MEMORY_VERTEX]
        assert set(memory.vectors) == {MEMORY_VECTOR_ATTRIBUTE, LEGACY_VECTOR_ATTRIBUTE}
        assert len(vectors(tg, MEMORY_VECTOR_ATTRIBUTE)) == 500
        # And a drop job created but never run or dropped, as a server stopping between the
        # statements of one request would leave it.
        out = gsql(
            tg,
            f"USE GRAPH {tg.state.graph}\nCREATE SCHEMA_CHANGE JOB {JOB_DROP_LEGACY_VECTOR} "
            f"FOR GRAPH {tg.state.graph} {{\n  ALTER VERTEX {MEMORY_VERTEX} DROP VECTOR "
            f"ATTRIBUTE {LEGACY_VECTOR_ATTRIBUTE};\n}}\n",
        )
        assert "Successfully created" in out
        assert await install_schema(args(tg), DIM) is True
        assert_migrated(tg, recs)
        # The rerun copied only what the first run had not.
        assert FailingSecondCopy.copies == 4


async def test_another_dimension_is_refused_and_nothing_changes(tg: TGServer) -> None:
    legacy_graph(tg, n=20)
    before = vectors(tg, LEGACY_VECTOR_ATTRIBUTE)
    statements = len(tg.state.statements)
    with pytest.raises(TigerGraphIndexError, match="4-dimensional vectors.*makes 8; re-embed"):
        await install_schema(args(tg), 8)
    assert len(tg.state.statements) == statements  # no GSQL sent
    assert set(tg.state.catalog.vertex_types[MEMORY_VERTEX].vectors) == {LEGACY_VECTOR_ATTRIBUTE}
    assert vectors(tg, LEGACY_VECTOR_ATTRIBUTE) == before


async def test_a_migrated_server_recalls_without_embedding_again(
    start_server: ServerFactory, scope: dict[str, str], fresh_database_url: str
) -> None:
    """Through the server: facts indexed by the memory service, a TigerGraph of the old release
    holding their vectors, then a server start that migrates it. The outbox has nothing to do,
    the embedder embeds nothing, and recall finds the facts by their old vectors. (A database
    of its own: no other test's outbox rows.)"""
    settings = {"fact_extract_async": False, "database_url": fresh_database_url}
    with serve_tigergraph() as first:
        memory = await start_server(**settings, **server_settings(first))
        for text in ("Prefers window seats on long flights", "Keeps a cat named Miso"):
            await memory.stub.AddFact(pb.AddFactRequest(**scope, text=text))
        await outbox_caught_up(memory)
        indexed = [
            VectorRecord(vid, v["scope_hash"], v[MEMORY_VECTOR_ATTRIBUTE], T0, None, T0, None)
            for vid, v in first.state.vertices.items()
        ]
        dimension = first.state.catalog.vector_dimension(MEMORY_VERTEX, MEMORY_VECTOR_ATTRIBUTE)
        await memory.channel.close()
        await memory.server.close()
    assert len(indexed) == 2 and dimension is not None
    with serve_tigergraph() as old:
        install_legacy(old, dimension)
        upsert_legacy(old, indexed)
        before = vectors(old, LEGACY_VECTOR_ATTRIBUTE)
        migrated = await start_server(**settings, **server_settings(old))
        assert vectors(old, MEMORY_VECTOR_ATTRIBUTE) == before
        assert vectors(old, LEGACY_VECTOR_ATTRIBUTE) == {}
        outbox = migrated.server.outbox
        assert outbox is not None
        outbox.facts_changed()
        await asyncio.sleep(0.5)
        assert (await outbox.backlog()).waiting == 0
        registry = migrated.server.metrics.registry
        assert registry.get_sample_value("graphrag_memory_embedding_batch_size_sum") in (None, 0)
        assert old.counts["upserts"] == 1 + 2 * 1  # the seed, then one copy and one scope page
        found = await migrated.stub.SearchFacts(
            pb.SearchFactsRequest(**scope, query="window seat", threshold=0.0, top_k=1)
        )
        assert [r.fact.text for r in found.results] == ["Prefers window seats on long flights"]
        assert found.results[0].vector_score > 0
