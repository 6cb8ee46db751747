"""AddFacts, the bulk path for imports: every fact as AddFact stores it, in order, in one
transaction (all or none); the same validation, each error naming its `facts[i]` field with
nothing written; idempotent by text; through the generated stubs and the client."""

from __future__ import annotations

from datetime import UTC, datetime

import grpc
import pytest

from memory_client import AsyncMemoryClient
from memory_client.v1 import memory_pb2 as pb
from memory_server.api.long_term_rpcs import MAX_FACTS_PER_CALL

from conftest import RunningServer, new_id


def _at(year: int, month: int, day: int) -> pb.NewFact:
    fact = pb.NewFact(text="Ran the Lisbon half marathon last Sunday", kind="other")
    fact.valid_time.FromDatetime(datetime(year, month, day, 12, tzinfo=UTC))
    return fact


async def _live(memory: RunningServer, scope: dict[str, str]) -> list[pb.Fact]:
    return list((await memory.stub.ListFacts(pb.ListFactsRequest(**scope))).facts)


async def _refused(memory: RunningServer, request: pb.AddFactsRequest) -> str:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await memory.stub.AddFacts(request)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    return str(caught.value.details())


async def test_facts_are_stored_in_order_with_their_fields(
    memory: RunningServer, scope: dict[str, str]
) -> None:
    conversation = new_id()
    response = await memory.stub.AddFacts(
        pb.AddFactsRequest(
            **scope,
            facts=[
                pb.NewFact(text="Prefers window seats", kind="preference"),
                pb.NewFact(text="Works at Acme", conversation_id=conversation),
                _at(2023, 5, 8),
                pb.NewFact(text="  Prefers window seats  "),  # the first one again
            ],
        )
    )
    ids = [f.fact_id for f in response.facts]
    assert [f.added for f in response.facts] == [True, True, True, False]
    assert ids[3] == ids[0] and len(set(ids)) == 3
    by_id = {f.fact_id: f for f in await _live(memory, scope)}
    assert set(by_id) == set(ids)
    assert (by_id[ids[0]].text, by_id[ids[0]].kind) == ("Prefers window seats", "preference")
    assert (by_id[ids[1]].kind, by_id[ids[1]].conversation_id) == ("other", conversation)
    marathon = by_id[ids[2]]
    assert marathon.valid_from.ToDatetime(tzinfo=UTC) == datetime(2023, 5, 8, 12, tzinfo=UTC)
    # "last Sunday" resolved against the fact's own time, as AddFact does.
    assert marathon.event_time.ToDatetime(tzinfo=UTC).date() == datetime(2023, 5, 7).date()
    for fact_id in ids[:3]:
        history = await memory.stub.GetFactHistory(
            pb.GetFactHistoryRequest(**scope, fact_id=fact_id)
        )
        assert [e.event for e in history.events] == ["ADD"]


async def test_the_same_call_again_writes_nothing_and_answers_the_same_ids(
    memory: RunningServer, scope: dict[str, str]
) -> None:
    request = pb.AddFactsRequest(
        **scope, facts=[pb.NewFact(text=f"Visited city number {i}") for i in range(50)]
    )
    first = await memory.stub.AddFacts(request)
    again = await memory.stub.AddFacts(request)
    assert [f.fact_id for f in again.facts] == [f.fact_id for f in first.facts]
    assert all(f.added for f in first.facts) and not any(f.added for f in again.facts)
    assert len(await _live(memory, scope)) == 50
    # An AddFact of one of them agrees.
    one = await memory.stub.AddFact(pb.AddFactRequest(**scope, text="Visited city number 7"))
    assert one.fact.fact_id == first.facts[7].fact_id


@pytest.mark.parametrize(
    ("facts", "field"),
    [
        ([], "facts"),
        ([pb.NewFact(text="Likes tea"), pb.NewFact(text="   ")], "facts[1].text"),
        ([pb.NewFact(text="Likes tea"), pb.NewFact(text="x" * 2001)], "facts[1].text"),
        ([pb.NewFact(text="Likes tea", kind="mood")], "facts[0].kind"),
        (
            [pb.NewFact(text="Likes tea"), pb.NewFact(text="Likes jam", conversation_id="a\nb")],
            "facts[1].conversation_id",
        ),
        ([pb.NewFact(text="Likes tea"), pb.NewFact(text="Likes \x00 jam")], "facts[1].text"),
    ],
)
async def test_a_bad_fact_is_named_and_nothing_is_written(
    memory: RunningServer, scope: dict[str, str], facts: list[pb.NewFact], field: str
) -> None:
    details = await _refused(memory, pb.AddFactsRequest(**scope, facts=facts))
    assert details.startswith(field), details
    assert await _live(memory, scope) == []


async def test_a_bad_valid_time_and_too_many_facts_are_refused(
    memory: RunningServer, scope: dict[str, str]
) -> None:
    bad = pb.NewFact(text="Likes jam")
    bad.valid_time.seconds = 10**12  # past year 9999
    details = await _refused(
        memory, pb.AddFactsRequest(**scope, facts=[pb.NewFact(text="Likes tea"), bad])
    )
    assert details.startswith("facts[1].valid_time"), details
    many = [pb.NewFact(text=f"Fact {i}") for i in range(MAX_FACTS_PER_CALL + 1)]
    details = await _refused(memory, pb.AddFactsRequest(**scope, facts=many))
    assert details.startswith("facts:") and str(MAX_FACTS_PER_CALL) in details, details
    assert await _live(memory, scope) == []


async def test_the_client_adds_facts_and_other_scopes_see_none(
    memory: RunningServer, scope: dict[str, str]
) -> None:
    async with AsyncMemoryClient(memory.address) as client:
        response = await client.add_facts(
            scope["username"],
            scope["graphname"],
            [pb.NewFact(text="Speaks Portuguese"), pb.NewFact(text="Has a cat named Miso")],
        )
    assert [f.added for f in response.facts] == [True, True]
    other = {"username": scope["username"] + "-other", "graphname": scope["graphname"]}
    assert await _live(memory, other) == []
    assert sorted(f.text for f in await _live(memory, scope)) == [
        "Has a cat named Miso",
        "Speaks Portuguese",
    ]
