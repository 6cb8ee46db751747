"""Read your own writes: a fact added or learned is found by meaning by the very next
SearchFacts or StartTurn of its scope, while its vector still waits in the outbox
(outbox/fresh.py). The outbox is held back (a long linger, no polling) until the test lets
it go, so the index cannot have the fact; the answer must be the one given once it has."""

from __future__ import annotations

from memory_client.v1 import memory_pb2 as pb

from conftest import RunningServer, ServerFactory, assert_eventually, new_id

# The paraphrase shares no word with the fact: only its meaning finds it.
FACT = "Is allergic to peanuts"
QUESTION = "Which foods make me ill?"
OTHERS = [
    "Works at Acme on the fraud team",
    "Lives in Lisbon",
    "Plays the cello in a quartet",
    "Drives a blue Honda Civic",
]
HELD = {"outbox_linger_seconds": 60.0, "outbox_poll_seconds": 3600}


def _scope() -> dict[str, str]:
    return {"username": new_id("fresh"), "graphname": "Finance"}


async def _pending(memory: RunningServer) -> int:
    """Outbox rows not yet applied to the index (of every scope: the database is shared)."""
    assert memory.server.outbox is not None
    return (await memory.server.outbox.backlog()).waiting


async def _search(memory: RunningServer, scope: dict[str, str]) -> list[tuple[str, float]]:
    found = await memory.stub.SearchFacts(
        pb.SearchFactsRequest(**scope, query=QUESTION, top_k=3, threshold=0.0)
    )
    return [(r.fact.text, round(r.vector_score, 4)) for r in found.results]


async def _indexed(memory: RunningServer) -> None:
    assert memory.server.outbox is not None
    sent = await memory.server.outbox.drain()
    assert sent > 0

    async def empty() -> bool:
        return await _pending(memory) == 0

    await assert_eventually(empty, what="the outbox sent everything")


async def test_an_added_fact_is_found_by_meaning_at_once(start_server: ServerFactory) -> None:
    memory = await start_server(**HELD)
    scope = _scope()
    await memory.stub.AddFacts(
        pb.AddFactsRequest(**scope, facts=[pb.NewFact(text=t) for t in [*OTHERS, FACT]])
    )
    assert await _pending(memory) >= len(OTHERS) + 1  # nothing of it indexed yet
    fresh = await _search(memory, scope)
    assert fresh[0][0] == FACT and fresh[0][1] > 0, fresh  # by meaning: its vector scored
    # As of a moment before it was written, it is not there.
    before = pb.SearchFactsRequest(**scope, query=QUESTION, top_k=3, threshold=0.0)
    before.as_of_transaction_time.FromSeconds(1_000_000_000)
    assert not (await memory.stub.SearchFacts(before)).results
    # The same answer as once the index has it.
    await _indexed(memory)
    assert await _search(memory, scope) == fresh


async def test_a_learned_fact_is_found_by_the_next_calls(start_server: ServerFactory) -> None:
    memory = await start_server(fact_extract_async=False, **HELD)
    scope = _scope()
    await memory.stub.AddFacts(
        pb.AddFactsRequest(**scope, facts=[pb.NewFact(text=t) for t in OTHERS])
    )
    chat = new_id()
    await memory.stub.StartTurn(
        pb.StartTurnRequest(**scope, conversation_id=chat, content="I'm allergic to peanuts.")
    )
    await memory.stub.CompleteTurn(
        pb.CompleteTurnRequest(**scope, conversation_id=chat, content="Noted, no peanuts.")
    )
    assert await _pending(memory) >= len(OTHERS) + 1
    fresh = await _search(memory, scope)
    assert fresh[0][0] == FACT and fresh[0][1] > 0, fresh
    turn = pb.StartTurnRequest(**scope, conversation_id=new_id(), content=QUESTION)
    recalled = [
        (f.text, round(f.score, 4))
        for f in (await memory.stub.StartTurn(turn)).context.long_term.facts
    ]
    await _indexed(memory)
    assert await _search(memory, scope) == fresh
    turn.conversation_id = new_id()
    again = [
        (f.text, round(f.score, 4))
        for f in (await memory.stub.StartTurn(turn)).context.long_term.facts
    ]
    assert recalled == again
