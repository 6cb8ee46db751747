"""At shutdown a call still running when the grace period is nearly over answers UNAVAILABLE
(which clients retry), not CANCELLED (which they cannot tell from their own cancellation), and
the write it was making is found again by its id on the retry."""

from __future__ import annotations

import asyncio
import time
import uuid

import asyncpg
import grpc
import pytest

from memory_client.v1 import memory_pb2 as pb

from conftest import ServerFactory, new_id


async def test_a_call_held_past_the_grace_period_answers_unavailable(
    start_server: ServerFactory, database_url: str
) -> None:
    memory = await start_server(shutdown_grace_seconds=1.0)
    scope = {"username": new_id("drain"), "graphname": "Finance"}
    chat = new_id()
    await memory.stub.StartTurn(pb.StartTurnRequest(**scope, conversation_id=chat, content="hi"))
    message_id = str(uuid.uuid4())
    holder = await asyncpg.connect(database_url)
    try:
        holding = holder.transaction()
        await holding.start()
        # The conversation's row, which the message append updates: the write now waits.
        await holder.execute(
            "SELECT 1 FROM conversations WHERE conversation_id = $1 FOR UPDATE", chat
        )
        held = asyncio.ensure_future(
            memory.stub.StartTurn(
                pb.StartTurnRequest(
                    **scope, conversation_id=chat, content="still there?", message_id=message_id
                ),
                timeout=30,
            )
        )
        await asyncio.sleep(0.3)
        assert not held.done()
        began = time.monotonic()
        closing = asyncio.ensure_future(memory.server.close())
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await held
        answered_s = time.monotonic() - began
        await holding.rollback()
    finally:
        await holder.close()
    await closing
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE, refused.value
    assert "shutting down" in (refused.value.details() or "")
    assert answered_s < 1.0  # before gRPC's own cut at the end of the grace period

    # The retry, on the next server, is answered from what was (or was not) written.
    again = await start_server()
    retried = await again.stub.StartTurn(
        pb.StartTurnRequest(
            **scope, conversation_id=chat, content="still there?", message_id=message_id
        )
    )
    assert retried.message.message_id == message_id
    page = await again.stub.GetConversation(
        pb.GetConversationRequest(**scope, conversation_id=chat)
    )
    assert [m.message_id for m in page.messages].count(message_id) == 1
