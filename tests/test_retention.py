"""Retention: unseen facts expire (closed, still visible as of before), then are purged with
their vectors; recall counts as seen."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import asyncpg
import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from memory_client.v1 import memory_pb2 as pb
from memory_server.memory.identity import scope_hash

from conftest import RunningServer, ServerFactory, assert_eventually


async def _age(database_url: str, fact_id: str, days: int) -> None:
    """Pretends the fact was last stated or recalled `days` ago."""
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute(
            "UPDATE facts SET last_seen_at = now() - $2::interval WHERE id = $1::uuid",
            fact_id,
            timedelta(days=days),
        )
    finally:
        await conn.close()


async def _caught_up(memory: RunningServer) -> None:
    outbox = memory.server.outbox
    assert outbox is not None
    outbox.facts_changed()

    async def done() -> bool:
        return (await outbox.backlog()).waiting == 0

    await assert_eventually(done, what="outbox drained")


async def test_unseen_facts_expire_then_are_purged(
    start_server: ServerFactory, scope: dict[str, str], database_url: str
):
    memory: RunningServer = await start_server(ltm_retention_days=30)
    stub = memory.stub
    old = (await stub.AddFact(pb.AddFactRequest(**scope, text="Uses the Finance graph"))).fact
    fresh = (await stub.AddFact(pb.AddFactRequest(**scope, text="Likes Sankey charts"))).fact
    await _age(database_url, old.fact_id, days=31)
    before = datetime.now(UTC)
    retention = memory.server.retention
    assert retention is not None

    assert await retention.run_once() == (1, 0)
    live = (await stub.ListFacts(pb.ListFactsRequest(**scope))).facts
    assert [f.fact_id for f in live] == [fresh.fact_id]
    history = await stub.GetFactHistory(pb.GetFactHistoryRequest(**scope, fact_id=old.fact_id))
    assert [e.event for e in history.events] == ["ADD", "EXPIRE"]
    then = Timestamp()
    then.FromDatetime(before)
    as_of = await stub.ListFacts(pb.ListFactsRequest(**scope, as_of_transaction_time=then))
    assert {f.fact_id for f in as_of.facts} == {old.fact_id, fresh.fact_id}

    await _caught_up(memory)
    assert memory.server.index is not None
    assert await memory.server.index.count(scope_hash(**scope)) == 2  # closed is still indexed

    # 30 days after expiry the fact is erased, vectors included.
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute(
            "UPDATE fact_history SET at = at - interval '31 days' WHERE fact_id = $1::uuid",
            old.fact_id,
        )
    finally:
        await conn.close()
    assert await retention.run_once() == (0, 1)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.GetFact(pb.GetFactRequest(**scope, fact_id=old.fact_id))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    await _caught_up(memory)
    assert await memory.server.index.count(scope_hash(**scope)) == 1


async def test_recall_keeps_a_fact_alive(
    start_server: ServerFactory, scope: dict[str, str], database_url: str
):
    memory: RunningServer = await start_server(ltm_retention_days=30)
    fact = (
        await memory.stub.AddFact(
            pb.AddFactRequest(**scope, text="Always answer in French", kind="preference")
        )
    ).fact
    await _age(database_url, fact.fact_id, days=31)
    started = await memory.stub.StartTurn(
        pb.StartTurnRequest(**scope, conversation_id="c", content="Summarise the graph")
    )
    assert [f.fact_id for f in started.context.long_term.facts] == [fact.fact_id]
    assert memory.server.retention is not None
    assert await memory.server.retention.run_once() == (0, 0)
