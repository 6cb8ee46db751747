"""Neighbours: recall brings in the facts said just before and just after a hit in the same
conversation (AddFact's conversation_id, or a learned fact's message), scoring the hit's score *
ltm_neighbour_decay, never across conversations, and filtered by the as-of point before it
ranks. Real PostgreSQL and the real MiniLM embedder, over gRPC."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from memory_client.v1 import memory_pb2 as pb

from conftest import RunningServer, ServerFactory, new_id, outbox_caught_up

DECAY = 0.75
SAID = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
# The question matches HIT; the others share no word with it and mean something else.
QUESTION = "Which watercolour landscape did Melanie paint for the gallery?"
HIT = "Melanie painted a watercolour landscape for the gallery"
BEFORE_FAR = "The plumber fixed the kitchen sink on Tuesday"
BEFORE = "Caroline asked whether the train to Boston was late"
AFTER = "My cousin adopted a grey kitten named Biscuit"
AFTER_FAR = "The quarterly tax forms are due next month"
ELSEWHERE = "Joanna bought new hiking boots yesterday"


def _ts(moment: datetime) -> Timestamp:
    ts = Timestamp()
    ts.FromDatetime(moment)
    return ts


async def _add(
    memory: RunningServer, scope: dict[str, str], text: str, at: datetime, conversation: str
) -> pb.Fact:
    reply = await memory.stub.AddFact(
        pb.AddFactRequest(**scope, text=text, valid_time=_ts(at), conversation_id=conversation)
    )
    return reply.fact


async def _scores(
    memory: RunningServer, scope: dict[str, str], **kw: object
) -> dict[str, pb.ScoredFact]:
    found = await memory.stub.SearchFacts(
        pb.SearchFactsRequest(**scope, query=QUESTION, top_k=20, threshold=0, **kw)  # type: ignore[arg-type]
    )
    return {r.fact.text: r for r in found.results}


async def _conversation_of_five(
    memory: RunningServer, scope: dict[str, str]
) -> tuple[str, dict[str, pb.Fact]]:
    conversation = new_id()
    facts = {}
    for i, text in enumerate((BEFORE_FAR, BEFORE, HIT, AFTER, AFTER_FAR)):
        facts[text] = await _add(memory, scope, text, SAID + timedelta(seconds=i), conversation)
    # Said between BEFORE and HIT, but in another conversation: not a neighbour.
    facts[ELSEWHERE] = await _add(memory, scope, ELSEWHERE, SAID + timedelta(seconds=1.5), new_id())
    await outbox_caught_up(memory)
    return conversation, facts


async def test_a_hit_brings_in_what_was_said_just_before_and_after_it(
    start_server: ServerFactory, scope: dict[str, str]
) -> None:
    memory = await start_server(ltm_link_decay=0, ltm_neighbour_decay=DECAY)
    conversation, facts = await _conversation_of_five(memory, scope)
    assert facts[HIT].conversation_id == conversation  # AddFact keeps its provenance
    got = await _scores(memory, scope)
    hit = got[HIT].score
    assert hit > 0.8 and max(r.score for t, r in got.items() if t != HIT) < hit
    for text in (BEFORE, AFTER):
        assert got[text].score == pytest.approx(hit * DECAY)
    # The farther ones and the other conversation's fact keep what the signals gave them.
    for text in (BEFORE_FAR, AFTER_FAR, ELSEWHERE):
        assert got.get(text) is None or got[text].score < 0.5 * hit


async def test_neighbours_are_filtered_by_the_as_of_point_before_ranking(
    start_server: ServerFactory, scope: dict[str, str]
) -> None:
    memory = await start_server(ltm_link_decay=0, ltm_neighbour_decay=DECAY)
    _, facts = await _conversation_of_five(memory, scope)
    before_delete = datetime.now(UTC)
    await memory.stub.DeleteFact(pb.DeleteFactRequest(**scope, fact_id=facts[AFTER].fact_id))
    got = await _scores(memory, scope)
    hit = got[HIT].score
    # AFTER is no longer believed: the next fact said after HIT is its neighbour now.
    assert AFTER not in got
    assert got[AFTER_FAR].score == pytest.approx(hit * DECAY)
    # As of before the delete, AFTER was believed, and it was the neighbour.
    then = await _scores(memory, scope, as_of_transaction_time=_ts(before_delete))
    assert then[AFTER].score == pytest.approx(then[HIT].score * DECAY)
    assert then.get(AFTER_FAR) is None or then[AFTER_FAR].score < 0.5 * then[HIT].score
    # As of a valid time before HIT was said, nothing of it (or its neighbours) is believed.
    early = await _scores(memory, scope, as_of_valid_time=_ts(SAID + timedelta(seconds=1.2)))
    assert HIT not in early and AFTER not in early


async def test_no_neighbours_without_a_conversation_or_with_decay_zero(
    start_server: ServerFactory, scope: dict[str, str]
) -> None:
    memory = await start_server(ltm_link_decay=0, ltm_neighbour_decay=DECAY)
    for i, text in enumerate((BEFORE, HIT, AFTER)):
        await _add(memory, scope, text, SAID + timedelta(seconds=i), "")
    await outbox_caught_up(memory)
    got = await _scores(memory, scope)
    assert all(got[t].score < 0.5 * got[HIT].score for t in (BEFORE, AFTER) if t in got)

    off = await start_server(ltm_link_decay=0, ltm_neighbour_decay=0)
    other = {**scope, "username": new_id("user")}
    await _conversation_of_five(off, other)
    got = await _scores(off, other)
    assert all(got[t].score < 0.5 * got[HIT].score for t in (BEFORE, AFTER) if t in got)


async def test_a_neighbour_that_does_not_name_the_questions_subject_is_weighed_down(
    start_server: ServerFactory, scope: dict[str, str]
) -> None:
    # "Melanie" in 11 of 16 facts: common, and the subject of QUESTION. BEFORE does not name
    # her, so it scores hit * decay * ltm_off_subject_weight; AFTER names her.
    memory = await start_server(
        ltm_link_decay=0, ltm_neighbour_decay=DECAY, ltm_off_subject_weight=0.5
    )
    after = f"Melanie said: {AFTER}"
    conversation = new_id()
    for i, text in enumerate((BEFORE, HIT, after)):
        await _add(memory, scope, text, SAID + timedelta(seconds=i), conversation)
    for i in range(9):
        await _add(memory, scope, f"Melanie's note {i}: the {i}th errand", SAID, "")
    for i in range(4):
        await _add(memory, scope, f"Reminder {i}: the {i}th chore", SAID, "")
    await outbox_caught_up(memory)
    got = await _scores(memory, scope)
    hit = got[HIT].score
    assert got[after].score == pytest.approx(hit * DECAY)
    assert got[BEFORE].score == pytest.approx(hit * DECAY * 0.5)


async def test_learned_facts_are_neighbours_by_the_messages_they_came_from(
    start_server: ServerFactory, scope: dict[str, str]
) -> None:
    memory = await start_server(
        fact_extract_async=False, ltm_link_decay=0, ltm_neighbour_decay=DECAY
    )
    conversation = new_id()
    for i, text in enumerate(
        ("My manager is Priya Raman.", "I live in Lisbon.", "I'm allergic to peanuts.")
    ):
        started = await memory.stub.StartTurn(
            pb.StartTurnRequest(
                **scope,
                conversation_id=conversation,
                content=text,
                created_at=_ts(SAID + timedelta(minutes=i)),
            )
        )
        await memory.stub.CompleteTurn(
            pb.CompleteTurnRequest(
                **scope,
                conversation_id=conversation,
                content="Noted.",
                parent_id=started.message.message_id,
                created_at=_ts(SAID + timedelta(minutes=i, seconds=5)),
            )
        )
    await outbox_caught_up(memory)
    found = await memory.stub.SearchFacts(
        pb.SearchFactsRequest(**scope, query="Where does the user live? Lisbon", threshold=0)
    )
    by_text = {r.fact.text: r for r in found.results}
    [home] = [t for t in by_text if "Lisbon" in t]
    [manager] = [t for t in by_text if "Priya" in t]
    [allergy] = [t for t in by_text if "peanut" in t]
    assert by_text[home].fact.conversation_id == conversation
    for text in (manager, allergy):
        assert by_text[text].score == pytest.approx(by_text[home].score * DECAY)


async def test_add_fact_rejects_a_bad_conversation_id(
    memory: RunningServer, scope: dict[str, str]
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await memory.stub.AddFact(
            pb.AddFactRequest(**scope, text=HIT, conversation_id="x" * 10_000)
        )
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "conversation_id" in (caught.value.details() or "")
    listed = await memory.stub.ListFacts(pb.ListFactsRequest(**scope))
    assert list(listed.facts) == []
