"""The embedding model is recorded; another one at start is a clear error until `reembed`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
import grpc
import pytest

from memory_client.v1 import memory_pb2 as pb
from memory_client.v1 import memory_pb2_grpc as pb_grpc
from memory_server.admin import backfill_episodes, reembed
from memory_server.main import MemoryServer
from memory_server.memory.identity import episode_partition, scope_hash
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
        await _one_vector_in(server, scope_hash(**scope), what="re-embedded vectors")
        async with grpc_channel(server) as stub:
            found = await stub.SearchFacts(
                pb.SearchFactsRequest(**scope, query="which charts", threshold=0.0)
            )
            assert [r.fact.text for r in found.results] == ["Prefers Sankey charts"]
            assert found.results[0].vector_score > 0


async def _one_vector_in(server: MemoryServer, partition: str, *, what: str) -> None:
    """Waits until the index holds one vector in `partition` and the outbox is empty."""
    index, outbox = server.index, server.outbox
    assert index is not None and outbox is not None

    async def indexed() -> bool:
        return await index.count(partition) == 1 and (await outbox.backlog()).waiting == 0

    await assert_eventually(indexed, what=what)


@asynccontextmanager
async def grpc_channel(server: MemoryServer) -> AsyncIterator[pb_grpc.MemoryServiceStub]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        yield pb_grpc.MemoryServiceStub(channel)


async def test_reembed_keeps_the_episodes_and_backfill_embeds_old_messages(
    fresh_database_url: str,
) -> None:
    """Re-embedding empties the index: the episodes come back with the facts. Messages stored
    while episodes were off (or before them) are embedded by `episodes-backfill`."""
    base = {"database_url": fresh_database_url, "listen_address": "127.0.0.1:0"}
    scope = {"username": "backfill-user", "graphname": "Finance"}
    partition = episode_partition(scope_hash(**scope))
    said = [pb.NewMessage(role=pb.ROLE_USER, content="The Pixel tablet is shared by two accounts.")]
    off = load_settings(overrides={**base, "episodes": False})
    async with MemoryServer(off) as server, grpc_channel(server) as stub:
        await stub.AppendMessages(
            pb.AppendMessagesRequest(**scope, conversation_id="old", messages=said)
        )
    assert await backfill_episodes(load_settings(overrides=base)) == 1
    async with MemoryServer(load_settings(overrides=base)) as server:
        await _one_vector_in(server, partition, what="the backfilled episode")
    assert await reembed(load_settings(overrides=base)) == 0  # no facts, one episode
    async with MemoryServer(load_settings(overrides=base)) as server:
        await _one_vector_in(server, partition, what="the re-embedded episode")
        async with grpc_channel(server) as stub:
            found = await stub.SearchEpisodes(
                pb.SearchEpisodesRequest(**scope, query="which gadget is shared", threshold=0.0)
            )
        assert [r.message.conversation_id for r in found.results] == ["old"]
        assert found.results[0].vector_score > 0
