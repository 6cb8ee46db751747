"""Recall's counts off the turn's path (memory.recall.seen): a turn notes which facts it handed back
and one flush per process writes recall_count and last_seen_at, adding up across servers,
surviving database faults and flushed at shutdown."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from memory_client.v1 import memory_pb2 as pb
from memory_server.memory.recall.seen import SeenRecorder
from memory_server.store.facts import PostgresFactStore

from conftest import RunningServer, assert_eventually, new_id

T0 = datetime(2030, 1, 1, tzinfo=UTC)


async def _counts(url: str, fact_ids: list[str]) -> dict[str, tuple[int, datetime]]:
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch(
            "SELECT id, recall_count, last_seen_at FROM facts WHERE id = ANY($1::uuid[])",
            [uuid.UUID(f) for f in fact_ids],
        )
    finally:
        await conn.close()
    return {str(r["id"]): (r["recall_count"], r["last_seen_at"]) for r in rows}


async def _add(memory: RunningServer, scope: dict[str, str], text: str) -> str:
    added = await memory.stub.AddFact(pb.AddFactRequest(**scope, text=text, kind="preference"))
    return added.fact.fact_id


async def _indexed(memory: RunningServer) -> None:
    outbox = memory.server.outbox
    assert outbox is not None
    outbox.facts_changed()

    async def indexed() -> bool:
        return (await outbox.backlog()).waiting == 0

    await assert_eventually(indexed, what="the vector index caught up")


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    # A short lock_timeout so a held row lock is a fault the flush sees quickly.
    async with asyncpg.create_pool(
        database_url, min_size=1, max_size=2, server_settings={"lock_timeout": "200ms"}
    ) as p:
        yield p


async def test_recalled_facts_are_counted_after_the_turn(
    memory: RunningServer, scope: dict[str, str], database_url: str
):
    fact_id = await _add(memory, scope, "Always answer in French")
    await _indexed(memory)
    [(before_count, before_seen)] = (await _counts(database_url, [fact_id])).values()
    assert before_count == 0
    for _ in range(2):
        started = await memory.stub.StartTurn(
            pb.StartTurnRequest(
                **scope, conversation_id=new_id(), content="Which language should you answer in?"
            )
        )
        assert [f.fact_id for f in started.context.long_term.facts] == [fact_id]

    async def counted() -> bool:
        count, seen = (await _counts(database_url, [fact_id]))[fact_id]
        return count == 2 and seen > before_seen

    await assert_eventually(counted, what="both recalls counted")


async def test_get_context_recalls_without_counting(
    memory: RunningServer, scope: dict[str, str], database_url: str
):
    """GetContext stores nothing, so its recall does not extend a fact's retention: only the
    StartTurn after it is counted (the flush that writes that count would carry theirs too)."""
    fact_id = await _add(memory, scope, "Always answer in Portuguese")
    await _indexed(memory)
    question = "Which language should you answer in?"
    for _ in range(2):
        peek = await memory.stub.GetContext(
            pb.GetContextRequest(**scope, conversation_id=new_id(), question=question)
        )
        assert [f.fact_id for f in peek.context.long_term.facts] == [fact_id]
    started = await memory.stub.StartTurn(
        pb.StartTurnRequest(**scope, conversation_id=new_id(), content=question)
    )
    assert [f.fact_id for f in started.context.long_term.facts] == [fact_id]

    async def counted() -> bool:
        return (await _counts(database_url, [fact_id]))[fact_id][0] > 0

    await assert_eventually(counted, what="the turn's recall counted")
    assert (await _counts(database_url, [fact_id]))[fact_id][0] == 1


async def test_counts_from_several_servers_add_and_last_seen_only_moves_forward(
    memory: RunningServer, scope: dict[str, str], database_url: str, pool: asyncpg.Pool
):
    a, b = await _add(memory, scope, "Likes tea"), await _add(memory, scope, "Likes chess")
    store = PostgresFactStore(pool)
    late = SeenRecorder(store, clock=lambda: T0 + timedelta(hours=1))
    early = SeenRecorder(store, clock=lambda: T0)
    late.record([a, b])
    late.record([a])
    early.record([a])
    assert await late.flush()
    assert await early.flush()  # flushed after, but saw them earlier: last_seen stays later
    got = await _counts(database_url, [a, b])
    assert got[a] == (3, T0 + timedelta(hours=1))
    assert got[b] == (1, T0 + timedelta(hours=1))


async def test_a_failed_flush_keeps_the_counts_for_the_next_one(
    memory: RunningServer, scope: dict[str, str], database_url: str, pool: asyncpg.Pool
):
    fact_id = await _add(memory, scope, "Prefers short answers")
    recorder = SeenRecorder(PostgresFactStore(pool), clock=lambda: T0)
    recorder.record([fact_id])
    holder = await asyncpg.connect(database_url)
    try:
        async with holder.transaction():
            await holder.execute(
                "SELECT 1 FROM facts WHERE id = $1::uuid FOR UPDATE", uuid.UUID(fact_id)
            )
            assert not await recorder.flush()  # lock_timeout: the database refused it
            recorder.record([fact_id])  # recalled again meanwhile
            assert recorder.pending == 1
    finally:
        await holder.close()
    assert await recorder.flush()
    assert (await _counts(database_url, [fact_id]))[fact_id] == (2, T0)


async def test_close_flushes_what_is_pending_and_the_loop_flushes_on_its_own(
    memory: RunningServer, scope: dict[str, str], database_url: str, pool: asyncpg.Pool
):
    first, second = await _add(memory, scope, "Uses vim"), await _add(memory, scope, "Uses zsh")
    store = PostgresFactStore(pool)
    recorder = SeenRecorder(store, interval_s=0.1, clock=lambda: T0)
    await recorder.start()
    recorder.record([first])

    async def flushed() -> bool:
        return (await _counts(database_url, [first]))[first][0] == 1

    await assert_eventually(flushed, what="the background flush")
    # A long interval: only close() can write this one.
    closing = SeenRecorder(store, interval_s=3600, clock=lambda: T0)
    await closing.start()
    closing.record([second])
    await closing.close()
    assert (await _counts(database_url, [second]))[second] == (1, T0)
    await recorder.close()
    await recorder.close()  # idempotent


async def test_record_never_holds_more_than_max_held(pool: asyncpg.Pool) -> None:
    recorder = SeenRecorder(PostgresFactStore(pool), max_held=2)
    recorder.record([str(uuid.uuid4()) for _ in range(3)])
    assert recorder.pending == 2 and recorder.dropped == 1
    assert await recorder.flush()  # ids of no fact: nothing to update, no error
    assert recorder.pending == 0
