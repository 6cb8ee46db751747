"""The embedding model is recorded; another one at start is a clear error until `reembed`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
import grpc
import pytest

from memory_client.v1 import memory_pb2 as pb
from memory_client.v1 import memory_pb2_grpc as pb_grpc
from memory_server.admin import reembed
from memory_server.main import MemoryServer
from memory_server.memory.identity import scope_hash
from memory_server.settings import load_settings
from memory_server.store.facts import EmbeddingModelMismatch

from conftest import assert_eventually


async def test_model_change_needs_reembed_and_then_converges(fresh_database_url: str):
    settings = load_settings(
        overrides={"database_url": fresh_database_url, "listen_address": "127.0.0.1:0"}
    )
    scope = {"username": "reembed-user", "graphname": "Finance"}
    async with MemoryServer(settings) as server, grpc_channel(server) as stub:
        await stub.AddFact(pb.AddFactRequest(**scope, text="Prefers Sankey charts"))
    conn = await asyncpg.connect(fresh_database_url)
    try:  # as if the vectors had been made by another model
        await conn.execute("UPDATE embedding_model SET model_name = 'old-model', dimension = 256")
    finally:
        await conn.close()

    with pytest.raises(EmbeddingModelMismatch, match="reembed"):
        await MemoryServer(settings).start()

    assert await reembed(settings) == 1
    async with MemoryServer(settings) as server:
        assert server.index is not None and server.outbox is not None
        index, outbox = server.index, server.outbox

        async def indexed() -> bool:
            return (
                await index.count(scope_hash(**scope)) == 1
                and (await outbox.backlog()).waiting == 0
            )

        await assert_eventually(indexed, what="re-embedded vectors")
        async with grpc_channel(server) as stub:
            found = await stub.SearchFacts(
                pb.SearchFactsRequest(**scope, query="which charts", threshold=0.0)
            )
            assert [r.fact.text for r in found.results] == ["Prefers Sankey charts"]
            assert found.results[0].vector_score > 0


@asynccontextmanager
async def grpc_channel(server: MemoryServer) -> AsyncIterator[pb_grpc.MemoryServiceStub]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        yield pb_grpc.MemoryServiceStub(channel)
