"""TigerGraph down for 30 s under a stream of turns: no turn fails, no fact change is lost,
and the index converges once it is back. And the outbox's request count per 1,000 changes."""

from __future__ import annotations

import asyncio
import time

import asyncpg
import pytest

from memory_client.v1 import memory_pb2 as pb
from memory_server.memory.identity import scope_hash

from conftest import RunningServer, ServerFactory, assert_eventually, new_id
from tg_index import server_settings
from tg_server import serve_tigergraph

pytestmark = pytest.mark.slow
OUTAGE_S = 30.0
_ATTRIBUTES = [
    "colour",
    "city",
    "airport",
    "editor",
    "shell",
    "font",
    "team",
    "sport",
    "dish",
    "season",
    "drink",
    "fruit",
    "band",
    "museum",
    "river",
    "planet",
    "metric",
    "dataset",
    "notebook",
]
_VALUES = ["amber", "basalt", "cedar", "delta", "ember", "fjord", "garnet", "harbor", "indigo"]


async def _versions(database_url: str, scope: dict[str, str]) -> int:
    conn = await asyncpg.connect(database_url)
    try:
        return int(
            await conn.fetchval(
                """SELECT count(*) FROM fact_versions v JOIN scopes s ON s.id = v.scope_id
                   WHERE s.username = $1 AND s.graphname = $2""",
                scope["username"],
                scope["graphname"],
            )
        )
    finally:
        await conn.close()


async def _drained(memory: RunningServer) -> None:
    outbox = memory.server.outbox
    assert outbox is not None
    outbox.facts_changed()

    async def done() -> bool:
        return (await outbox.backlog()).waiting == 0

    await assert_eventually(done, timeout_s=60, what="the outbox drained")


async def test_turns_keep_serving_while_tigergraph_is_down(
    start_server: ServerFactory, scope: dict[str, str], database_url: str
):
    with serve_tigergraph() as tg:
        memory = await start_server(
            fact_extract_async=False,
            **server_settings(tg),
            outbox_max_backoff_seconds=2,
            request_timeout_seconds=5,
        )
        stub = memory.stub
        await stub.AddFact(pb.AddFactRequest(**scope, text="Prefers concise answers"))
        await _drained(memory)
        tg.down()
        degraded = turns = 0
        started = time.monotonic()
        while time.monotonic() - started < OUTAGE_S:
            # Each turn states a fact: new attributes ADD, repeated ones with a new value UPDATE.
            attribute = _ATTRIBUTES[turns % len(_ATTRIBUTES)]
            value = _VALUES[(turns // len(_ATTRIBUTES)) % len(_VALUES)]
            conversation = new_id()
            turn = await stub.StartTurn(
                pb.StartTurnRequest(
                    **scope,
                    conversation_id=conversation,
                    content=f"My favourite {attribute} is {value}.",
                )
            )
            degraded += turn.context.long_term.degraded
            await stub.CompleteTurn(
                pb.CompleteTurnRequest(
                    **scope,
                    conversation_id=conversation,
                    content="Noted.",
                    parent_id=turn.message.message_id,
                )
            )
            turns += 1
            await asyncio.sleep(0.1)
        assert turns > 20
        assert degraded > 0, "recall says it is degraded while the index is down"
        versions = await _versions(database_url, scope)
        assert versions > turns, "every turn's fact change was committed during the outage"
        assert memory.server.outbox is not None
        assert (await memory.server.outbox.backlog()).waiting > 0

        tg.up()
        await _drained(memory)
        index = memory.server.index
        assert index is not None
        assert await index.count(scope_hash(**scope)) == versions
        found = await stub.SearchFacts(
            pb.SearchFactsRequest(**scope, query="favourite airport", threshold=0.0, top_k=1)
        )
        assert found.results[0].vector_score > 0


async def test_a_thousand_changes_take_few_tigergraph_requests(
    start_server: ServerFactory, scope: dict[str, str]
):
    with serve_tigergraph() as tg:
        memory = await start_server(
            **server_settings(tg),
            outbox_batch_size=256,
        )
        stub = memory.stub
        before = dict(tg.counts)
        slots = asyncio.Semaphore(64)  # stay within one scope's mailbox

        async def add(i: int) -> None:
            async with slots:
                await stub.AddFact(
                    pb.AddFactRequest(**scope, text=f"Account {i} belongs to ring {i % 7}")
                )

        await asyncio.gather(*(add(i) for i in range(1000)))
        await _drained(memory)
        sent = {k: v - before.get(k, 0) for k, v in tg.counts.items()}
        writes = sum(
            sent.get(kind, 0)
            for kind in (
                "upserts",
                "deletes",
                "query:Memory_delete_ids",
                "query:Memory_purge_scope",
            )
        )
        assert 0 < writes <= 20, sent
