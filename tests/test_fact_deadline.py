"""A request's deadline reaches the fact store: with the fact tables locked by another session,
every fact RPC with a 1 s deadline answers DEADLINE_EXCEEDED, writes nothing, and leaves no
statement of the server waiting behind the lock (the pool's own statement limit,
request_timeout_seconds, is 30 s). The store is given what is left of the deadline for every
statement; gRPC also cancels a handler whose deadline passed, so this holds the behaviour, not
which of the two ends the statement first."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import grpc
import pytest

from memory_client.v1 import memory_pb2 as pb

from conftest import ServerFactory, assert_eventually, new_id, outbox_caught_up

BUDGET_S = 1.0
# Time a call may take past its budget (a loaded CI machine) before the test calls it a hang.
SLACK_S = 4.0


@asynccontextmanager
async def facts_locked(dsn: str) -> AsyncIterator[asyncpg.Connection]:
    """Another session holding the fact tables exclusively until the block ends."""
    conn = await asyncpg.connect(dsn)
    try:
        async with conn.transaction():
            await conn.execute("LOCK TABLE facts, fact_versions IN ACCESS EXCLUSIVE MODE")
            yield conn
    finally:
        await conn.close()


async def _waiting_on_locks(conn: asyncpg.Connection) -> int:
    found: int = await conn.fetchval(
        """SELECT count(*) FROM pg_stat_activity
           WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid()
             AND datname = current_database()"""
    )
    return found


async def test_fact_rpcs_answer_deadline_exceeded_behind_a_lock(
    start_server: ServerFactory, fresh_database_url: str, scope: dict[str, str]
) -> None:
    memory = await start_server(database_url=fresh_database_url, request_timeout_seconds=BUDGET_S)
    stub = memory.stub
    added = await stub.AddFact(pb.AddFactRequest(**scope, text="Prefers green tea."))
    fact_id = added.fact.fact_id
    await outbox_caught_up(memory)
    conversation = new_id()
    await stub.StartTurn(
        pb.StartTurnRequest(**scope, conversation_id=conversation, content="Hello there.")
    )
    calls: dict[str, tuple[Callable[..., Awaitable[Any]], Any]] = {
        "GetContext": (
            stub.GetContext,
            pb.GetContextRequest(**scope, conversation_id=conversation, question="Which tea?"),
        ),
        "SearchFacts": (stub.SearchFacts, pb.SearchFactsRequest(**scope, query="tea")),
        "ListFacts": (stub.ListFacts, pb.ListFactsRequest(**scope)),
        "GetFact": (stub.GetFact, pb.GetFactRequest(**scope, fact_id=fact_id)),
        "GetFactHistory": (
            stub.GetFactHistory,
            pb.GetFactHistoryRequest(**scope, fact_id=fact_id),
        ),
        "AddFact": (stub.AddFact, pb.AddFactRequest(**scope, text="Lives in Porto.")),
        "AddFacts": (
            stub.AddFacts,
            pb.AddFactsRequest(**scope, facts=[pb.NewFact(text="Has a cat named Miso.")]),
        ),
        "UpdateFact": (
            stub.UpdateFact,
            pb.UpdateFactRequest(**scope, fact_id=fact_id, text="Prefers black tea."),
        ),
        "DeleteFact": (stub.DeleteFact, pb.DeleteFactRequest(**scope, fact_id=fact_id)),
        "ForgetScope": (stub.ForgetScope, pb.ForgetScopeRequest(**scope)),
    }
    async with facts_locked(fresh_database_url) as locker:
        for name, (method, request) in calls.items():
            began = time.monotonic()
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await asyncio.wait_for(method(request, timeout=BUDGET_S), BUDGET_S + SLACK_S)
            took_s = time.monotonic() - began
            assert raised.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED, (name, raised.value)
            assert took_s < BUDGET_S + SLACK_S, (name, took_s)

            # The server's statement was cancelled, not left waiting for the lock.
            async def released() -> bool:
                return await _waiting_on_locks(locker) == 0

            await assert_eventually(released, timeout_s=SLACK_S, what=f"{name} let go")
    # Nothing was half written: the one fact, unchanged, and nothing else.
    listed = await stub.ListFacts(pb.ListFactsRequest(**scope))
    assert [f.text for f in listed.facts] == ["Prefers green tea."]
