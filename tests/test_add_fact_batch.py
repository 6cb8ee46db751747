"""AddFacts that queue back to back on a scope's actor are applied in one transaction
(ActorRegistry.run_batched, FactStore.apply_batch), with what each would have got alone: the
same text twice is stored once, each fact keeps its own provenance, and the cap still evicts.
Real PostgreSQL, over gRPC; the scope's write lock, held by the test's own session, makes the
AddFacts queue."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import asyncpg
import httpx
from prometheus_client.parser import text_string_to_metric_families

from memory_client.v1 import memory_pb2 as pb
from memory_server.memory.identity import Scope
from memory_server.store.scope_lock import lock_scope

from conftest import RunningServer, ServerFactory, assert_eventually

TEXTS = [f"Tracks supplier number {n} in the EMEA region" for n in range(12)]


async def _mailbox_depth(server: RunningServer) -> float:
    url = f"http://127.0.0.1:{server.server.metrics_port}/metrics"
    async with httpx.AsyncClient() as http:
        reply = await http.get(url)
    for family in text_string_to_metric_families(reply.text):
        if family.name == "graphrag_memory_mailbox_depth":
            return float(family.samples[0].value)
    raise AssertionError("no graphrag_memory_mailbox_depth on /metrics")


@asynccontextmanager
async def _scope_locked(database_url: str, scope: dict[str, str]) -> AsyncIterator[None]:
    """Holds the scope's write lock (as another server's transaction would) until the end."""
    conn = await asyncpg.connect(database_url)
    try:
        async with conn.transaction():
            await lock_scope(conn, Scope(scope["username"], scope["graphname"]))
            yield
    finally:
        await conn.close()


async def _queued_behind_the_lock(
    memory: RunningServer, database_url: str, requests: Sequence[pb.AddFactRequest]
) -> list[pb.AddFactResponse]:
    """Sends the requests one by one while the scope is locked: the first waits for the lock
    on the actor, and each next one is sent once the one before it is queued, so the rest
    queue in this order and run as one batch after the first."""
    scope = {"username": requests[0].username, "graphname": requests[0].graphname}
    async with _scope_locked(database_url, scope):
        calls = [asyncio.ensure_future(memory.stub.AddFact(requests[0], timeout=60))]
        conn = await asyncpg.connect(database_url)
        try:

            async def waiting_for_the_lock() -> bool:
                return bool(
                    await conn.fetchval(
                        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                    )
                )

            await assert_eventually(waiting_for_the_lock, timeout_s=30, what="a lock wait")
        finally:
            await conn.close()
        for k, request in enumerate(requests[1:], start=1):
            calls.append(asyncio.ensure_future(memory.stub.AddFact(request, timeout=60)))

            async def queued(k: int = k) -> bool:
                return await _mailbox_depth(memory) == k

            await assert_eventually(queued, timeout_s=30, what=f"AddFact {k} queued")
        assert not any(c.done() for c in calls)
    return list(await asyncio.gather(*calls))


async def test_queued_addfacts_commit_together_and_each_text_is_stored_once(
    start_server: ServerFactory, scope: dict[str, str], database_url: str
) -> None:
    memory = await start_server(metrics_address="127.0.0.1:0")
    # Each text twice, the second time from another conversation.
    stated = [(t, f"conv-{i}") for i, t in enumerate(TEXTS)]
    stated += [(t, f"again-{i}") for i, t in enumerate(TEXTS)]
    requests = [pb.AddFactRequest(**scope, text=t, conversation_id=c) for t, c in stated]
    answers = await _queued_behind_the_lock(memory, database_url, requests)

    first = {}
    for (text, _), answer in zip(stated, answers, strict=True):
        assert answer.fact.text == text
        first.setdefault(text, answer.fact.fact_id)
        assert answer.fact.fact_id == first[text]  # the restatement answers the stored fact
    listed = await memory.stub.ListFacts(pb.ListFactsRequest(**scope))
    assert sorted(f.text for f in listed.facts) == sorted(TEXTS)
    by_text = {f.text: f for f in listed.facts}
    for i, text in enumerate(TEXTS):
        fact = by_text[text]
        assert fact.fact_id == first[text]
        assert fact.conversation_id == f"conv-{i}"  # provenance: the request that stored it
        history = await memory.stub.GetFactHistory(
            pb.GetFactHistoryRequest(**scope, fact_id=fact.fact_id)
        )
        assert [e.event for e in history.events] == ["ADD"]
    # The first AddFact committed alone, the other eleven texts in one transaction (the
    # mailbox held all of them when the lock was let go): one transaction time.
    recorded = {f.text: f.recorded_at.ToDatetime() for f in listed.facts}
    assert len({recorded[t] for t in TEXTS[1:]}) == 1
    assert recorded[TEXTS[0]] < recorded[TEXTS[1]]


async def test_a_batch_over_the_cap_evicts_as_single_writes_would(
    start_server: ServerFactory, scope: dict[str, str], database_url: str
) -> None:
    memory = await start_server(metrics_address="127.0.0.1:0", max_facts_per_scope=5)
    requests = [pb.AddFactRequest(**scope, text=t) for t in TEXTS[:8]]
    answers = await _queued_behind_the_lock(memory, database_url, requests)

    listed = await memory.stub.ListFacts(pb.ListFactsRequest(**scope))
    # One at a time, the 6th, 7th and 8th AddFact would each have evicted the oldest fact:
    # the first three. In one batch it is the same three.
    assert sorted(f.text for f in listed.facts) == sorted(TEXTS[3:8])
    for k, answer in enumerate(answers):
        history = await memory.stub.GetFactHistory(
            pb.GetFactHistoryRequest(**scope, fact_id=answer.fact.fact_id)
        )
        assert [e.event for e in history.events] == (["ADD", "EVICT"] if k < 3 else ["ADD"])
