"""StartTurn in a scope whose last turn had live facts recalls beside the message write, not
after it; everywhere else, and whenever the facts have gone meanwhile, the answer is the one
a turn that recalls after its write gives."""

from __future__ import annotations

import asyncio

import asyncpg
from test_ltm import _indexed

from memory_client.v1 import memory_pb2 as pb

from conftest import RunningServer, ServerFactory, assert_eventually, new_id


def _scope() -> dict[str, str]:
    return {"username": f"beside-{new_id()[:8]}", "graphname": "Finance"}


async def _turn(
    memory: RunningServer, scope: dict[str, str], chat: str, question: str
) -> pb.StartTurnResponse:
    return await memory.stub.StartTurn(
        pb.StartTurnRequest(**scope, conversation_id=chat, content=question), timeout=30
    )


async def test_recall_runs_while_the_write_waits(
    start_server: ServerFactory, database_url: str
) -> None:
    memory = await start_server(fact_extract_async=False)
    scope, chat = _scope(), new_id()
    await memory.stub.AddFact(pb.AddFactRequest(**scope, text="Prefers answers in French"))
    await _indexed(memory)
    first = await _turn(memory, scope, chat, "Which language do I like answers in?")
    assert "French" in first.context.long_term.facts[0].text  # the scope is known to have facts

    holder = await asyncpg.connect(database_url)
    try:
        holding = holder.transaction()
        await holding.start()
        # The conversation's row, which the message append updates: the write now waits.
        await holder.execute(
            "SELECT 1 FROM conversations WHERE conversation_id = $1 FOR UPDATE", chat
        )
        embedded = memory.server.embedder.texts
        turn = asyncio.ensure_future(
            _turn(memory, scope, chat, "Remind me, what language should replies use?")
        )

        async def question_embedded() -> bool:
            return memory.server.embedder.texts > embedded

        await assert_eventually(question_embedded, what="the question embedded during the write")
        await asyncio.sleep(0.2)
        assert not turn.done()  # the write is still held
        await holding.rollback()
    finally:
        await holder.close()
    second = await turn
    assert [f.text for f in second.context.long_term.facts] == ["Prefers answers in French"]
    assert [m.content for m in second.context.recent_messages] == [
        "Which language do I like answers in?"
    ]


async def test_facts_gone_since_the_last_turn_are_not_recalled(start_server: ServerFactory) -> None:
    memory = await start_server(fact_extract_async=False)
    scope, chat = _scope(), new_id()
    added = await memory.stub.AddFact(pb.AddFactRequest(**scope, text="Owns a red canoe"))
    await _indexed(memory)
    first = await _turn(memory, scope, chat, "What colour is my canoe?")
    assert [f.text for f in first.context.long_term.facts] == ["Owns a red canoe"]

    await memory.stub.DeleteFact(pb.DeleteFactRequest(**scope, fact_id=added.fact.fact_id))
    second = await _turn(memory, scope, chat, "Tell me about my canoe again")
    assert list(second.context.long_term.facts) == []

    # And the other way: the scope's first fact since is recalled on the very next turn.
    await memory.stub.AddFact(pb.AddFactRequest(**scope, text="Rows a green kayak on Sundays"))
    await _indexed(memory)
    third = await _turn(memory, scope, chat, "Which kayak do I row on Sundays?")
    assert [f.text for f in third.context.long_term.facts] == ["Rows a green kayak on Sundays"]
