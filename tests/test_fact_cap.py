"""max_facts_per_scope: a write that takes the scope over the cap evicts the least recently seen
live facts (EVICT in their history); writes within the cap evict nothing. Real PostgreSQL, over
gRPC."""

from __future__ import annotations

from memory_client.v1 import memory_pb2 as pb

from conftest import ServerFactory

TEXTS = [
    "Prefers tea over coffee",
    "Lives in Lisbon",
    "Works at Acme Analytics",
    "Has a dog named Biscuit",
    "Plays the cello on Sundays",
]


async def test_a_write_over_the_cap_evicts_the_least_recently_seen_facts(
    start_server: ServerFactory, scope: dict[str, str]
) -> None:
    memory = await start_server(max_facts_per_scope=3)
    ids = []
    for text in TEXTS[:3]:
        ids.append((await memory.stub.AddFact(pb.AddFactRequest(**scope, text=text))).fact.fact_id)
    listed = await memory.stub.ListFacts(pb.ListFactsRequest(**scope))
    assert sorted(f.text for f in listed.facts) == sorted(TEXTS[:3])  # at the cap: none evicted

    for text in TEXTS[3:]:
        ids.append((await memory.stub.AddFact(pb.AddFactRequest(**scope, text=text))).fact.fact_id)
    listed = await memory.stub.ListFacts(pb.ListFactsRequest(**scope))
    assert sorted(f.text for f in listed.facts) == sorted(TEXTS[2:])
    for fact_id in ids[:2]:
        history = await memory.stub.GetFactHistory(
            pb.GetFactHistoryRequest(**scope, fact_id=fact_id)
        )
        assert [e.event for e in history.events] == ["ADD", "EVICT"]
    history = await memory.stub.GetFactHistory(pb.GetFactHistoryRequest(**scope, fact_id=ids[2]))
    assert [e.event for e in history.events] == ["ADD"]
