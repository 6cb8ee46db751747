"""Event time on every fact, end to end over gRPC on the real PostgreSQL: a learned fact is valid
from its message's time (an AppendMessages import keeps the original), a time expression in it
is resolved against that time, AddFact takes an explicit valid time, the rendered context shows
the dates, and questions that ask "when" weigh dated facts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from memory_client.v1 import memory_pb2 as pb
from memory_server.extraction.event_dates import DateparserEvents
from memory_server.memory.recall.rank import fuse
from memory_server.tokens import TiktokenCounter

from conftest import RunningServer, ServerFactory, new_id, outbox_caught_up

SAID = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)  # LoCoMo's first session: "1:56 pm on 8 May"
WEIGHT = 0.2


def _ts(moment: datetime) -> Timestamp:
    ts = Timestamp()
    ts.FromDatetime(moment)
    return ts


def _at(ts: Timestamp) -> datetime:
    return ts.ToDatetime(UTC)


@pytest.fixture
async def memory(start_server: ServerFactory) -> RunningServer:
    # Learning before CompleteTurn returns, so that assertions need no polling.
    return await start_server(fact_extract_async=False, ltm_time_intent_weight=WEIGHT)


async def _import_then_reply(
    memory: RunningServer, scope: dict[str, str], text: str, said_at: datetime
) -> None:
    """Imports a user message with its original time, then the reply to it arrives."""
    conversation, message_id = new_id(), new_id("msg")
    imported = await memory.stub.AppendMessages(
        pb.AppendMessagesRequest(
            **scope,
            conversation_id=conversation,
            messages=[
                pb.NewMessage(
                    role=pb.ROLE_USER, content=text, message_id=message_id, created_at=_ts(said_at)
                )
            ],
        )
    )
    assert imported.inserted == 1
    await memory.stub.CompleteTurn(
        pb.CompleteTurnRequest(
            **scope, conversation_id=conversation, content="Noted.", parent_id=message_id
        )
    )


async def _live(memory: RunningServer, scope: dict[str, str]) -> list[pb.Fact]:
    return list((await memory.stub.ListFacts(pb.ListFactsRequest(**scope))).facts)


@pytest.mark.parametrize(
    ("text", "event", "period"),
    [
        # Resolved against 8 May 2023, not against today.
        ("I decided yesterday to switch to PostgreSQL.", datetime(2023, 5, 7), "day"),
        ("I moved to Berlin last year.", datetime(2022, 5, 8), "year"),
        ("I'm working on the fraud graph migration that starts next month.", None, ""),
        ("I prefer concise bullet points.", None, ""),
    ],
)
async def test_a_fact_learned_from_an_imported_message_is_valid_from_its_original_time(
    memory: RunningServer, scope: dict[str, str], text: str, event: datetime | None, period: str
):
    before = datetime.now(UTC)
    await _import_then_reply(memory, scope, text, SAID)
    [fact] = await _live(memory, scope)
    assert _at(fact.valid_from) == SAID
    assert _at(fact.recorded_at) >= before - timedelta(seconds=1)  # learned now, true since then
    if event is None and "next month" in text:
        # A future event keeps valid_from at the message; its date is June 2023.
        assert fact.HasField("event_time") and fact.event_period == "month"
        assert _at(fact.event_time).strftime("%Y-%m") == "2023-06"
    elif event is None:
        assert not fact.HasField("event_time") and fact.event_period == ""
    else:
        assert fact.event_period == period
        assert _at(fact.event_time).date() == event.date()


async def test_a_live_turn_stamps_the_fact_with_the_user_message_time(
    memory: RunningServer, scope: dict[str, str]
):
    conversation = new_id()
    started = await memory.stub.StartTurn(
        pb.StartTurnRequest(
            **scope, conversation_id=conversation, content="I moved to Lisbon yesterday."
        )
    )
    await memory.stub.CompleteTurn(
        pb.CompleteTurnRequest(
            **scope,
            conversation_id=conversation,
            content="Welcome!",
            parent_id=started.message.message_id,
        )
    )
    [fact] = await _live(memory, scope)
    said = _at(started.message.created_at)
    assert _at(fact.valid_from) == said
    assert fact.event_period == "day"
    assert _at(fact.event_time).date() == (said - timedelta(days=1)).date()


async def test_an_imported_change_ends_the_old_version_when_it_was_said(
    memory: RunningServer, scope: dict[str, str]
):
    changed = SAID + timedelta(days=30)
    await _import_then_reply(memory, scope, "I prefer concise bullet points.", SAID)
    await _import_then_reply(memory, scope, "Actually I prefer long explanations now.", changed)
    [live] = await _live(memory, scope)
    assert "long explanations" in live.text and _at(live.valid_from) == changed
    versions = (
        await memory.stub.GetFact(pb.GetFactRequest(**scope, fact_id=live.fact_id))
    ).versions
    [ended] = [v for v in versions if v.HasField("valid_to") and not v.HasField("superseded_at")]
    assert (_at(ended.valid_from), _at(ended.valid_to)) == (SAID, changed)
    # What was true in between is the old preference, whatever day the import ran.
    middle = await memory.stub.ListFacts(
        pb.ListFactsRequest(**scope, as_of_valid_time=_ts(SAID + timedelta(days=10)))
    )
    assert [f.text for f in middle.facts] == [ended.text]


async def test_add_fact_takes_a_valid_time_and_resolves_against_it(
    memory: RunningServer, scope: dict[str, str]
):
    added = await memory.stub.AddFact(
        pb.AddFactRequest(
            **scope,
            text="Caroline: I went to a LGBTQ support group yesterday",
            valid_time=_ts(SAID),
        )
    )
    fact = added.fact
    assert _at(fact.valid_from) == SAID
    assert (_at(fact.event_time).date(), fact.event_period) == (datetime(2023, 5, 7).date(), "day")
    before = await memory.stub.ListFacts(
        pb.ListFactsRequest(**scope, as_of_valid_time=_ts(SAID - timedelta(days=1)))
    )
    assert list(before.facts) == []
    assert [f.fact_id for f in await _live(memory, scope)] == [fact.fact_id]

    plain = await memory.stub.AddFact(pb.AddFactRequest(**scope, text="Prefers green tea"))
    assert _at(plain.fact.valid_from) >= _at(plain.fact.recorded_at) - timedelta(seconds=1)
    assert not plain.fact.HasField("event_time")


@pytest.mark.parametrize(
    ("stamp", "problem"),
    [(Timestamp(seconds=0, nanos=-1), "nanos"), (Timestamp(seconds=-62_135_596_801), "seconds")],
)
async def test_add_fact_refuses_a_bad_valid_time_naming_the_field(
    memory: RunningServer, scope: dict[str, str], stamp: Timestamp, problem: str
):
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await memory.stub.AddFact(pb.AddFactRequest(**scope, text="Likes jazz", valid_time=stamp))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    details = err.value.details() or ""
    assert "valid_time" in details and problem in details, details
    assert await _live(memory, scope) == []


async def test_the_rendered_context_shows_each_recalled_fact_s_dates(
    memory: RunningServer, scope: dict[str, str]
):
    text = "Caroline went to a LGBTQ support group yesterday"
    await memory.stub.AddFact(pb.AddFactRequest(**scope, text=text, valid_time=_ts(SAID)))
    await outbox_caught_up(memory)
    started = await memory.stub.StartTurn(
        pb.StartTurnRequest(
            **scope, conversation_id=new_id(), content="When did Caroline go to the support group?"
        )
    )
    [recalled] = started.context.long_term.facts
    assert _at(recalled.valid_from) == SAID and recalled.event_period == "day"
    line = f"- {text} (stated 2023-05-08; refers to 2023-05-07)\n"
    section = "### Long-term memory about the user\n" + line + "\n"
    assert section in started.context.rendered
    # The token count covers the dates too.
    assert started.context.long_term.tokens == TiktokenCounter().count(section)


async def test_a_when_question_weighs_dated_facts_and_no_other_question_does(
    memory: RunningServer, scope: dict[str, str]
):
    dated = "Melanie ran a charity race for mental health last Saturday"
    undated = "Melanie ran a charity race for mental health"
    for text in (dated, undated):
        await memory.stub.AddFact(pb.AddFactRequest(**scope, text=text, valid_time=_ts(SAID)))
    await outbox_caught_up(memory)

    async def scores(query: str) -> dict[str, tuple[float, float]]:
        found = await memory.stub.SearchFacts(
            pb.SearchFactsRequest(**scope, query=query, top_k=10, threshold=0)
        )
        return {
            r.fact.text: (r.score, fuse(r.vector_score, r.lexical_score)) for r in found.results
        }

    when = await scores("When did Melanie run the charity race?")
    assert when[dated][0] == pytest.approx(fuse(when[dated][1], WEIGHT))
    assert when[undated][0] == pytest.approx(when[undated][1])
    assert when[dated][0] > when[dated][1]
    what = await scores("What did Melanie run for mental health?")
    for score, unweighted in what.values():
        assert score == pytest.approx(unweighted)


async def test_a_question_naming_a_date_weighs_the_facts_about_that_time(
    memory: RunningServer, scope: dict[str, str]
):
    in_may = "John went to a tech convention with his colleagues last month"  # said in June
    in_june = "John went to a tech convention with his colleagues"  # said in June
    for text in (in_may, in_june):
        await memory.stub.AddFact(
            pb.AddFactRequest(**scope, text=text, valid_time=_ts(datetime(2023, 6, 2, tzinfo=UTC)))
        )
    await outbox_caught_up(memory)

    async def scores(query: str) -> dict[str, tuple[float, float]]:
        found = await memory.stub.SearchFacts(
            pb.SearchFactsRequest(**scope, query=query, top_k=10, threshold=0)
        )
        return {
            r.fact.text: (r.score, fuse(r.vector_score, r.lexical_score)) for r in found.results
        }

    # "in May 2023": the fact whose event is May 2023 gets the vote, the one said on 2 June
    # (no date in its text) does not; "in June 2023" the other way round.
    may = await scores("What did John attend with his colleagues in May 2023?")
    assert may[in_may][0] == pytest.approx(fuse(may[in_may][1], WEIGHT))
    assert may[in_june][0] == pytest.approx(may[in_june][1])
    june = await scores("What did John attend with his colleagues in June 2023?")
    assert june[in_june][0] == pytest.approx(fuse(june[in_june][1], WEIGHT))
    assert june[in_may][0] == pytest.approx(june[in_may][1])


@pytest.mark.parametrize(
    "said",
    [
        Timestamp(seconds=-62_135_596_800),  # 0001-01-01T00:00:00Z: PostgreSQL's -infinity
        Timestamp(seconds=-62_135_596_800 + 3600),  # "yesterday" would be before year 1
        Timestamp(seconds=253_402_300_799),  # 9999-12-31T23:59:59Z: "tomorrow" is past 9999
    ],
)
async def test_valid_times_at_the_ends_of_the_range_store_search_and_render(
    memory: RunningServer, scope: dict[str, str], said: Timestamp
):
    text = "Went to the tax office yesterday and will again tomorrow in May 2023"
    added = await memory.stub.AddFact(pb.AddFactRequest(**scope, text=text, valid_time=said))
    await outbox_caught_up(memory)
    found = await memory.stub.SearchFacts(
        pb.SearchFactsRequest(
            **scope, query="When did I go to the tax office in May 2023?", threshold=0
        )
    )
    believed = said.seconds < 253_402_300_799  # valid from the last second: not yet true
    assert [r.fact.fact_id for r in found.results] == ([added.fact.fact_id] if believed else [])
    started = await memory.stub.StartTurn(
        pb.StartTurnRequest(
            **scope, conversation_id=new_id(), content="When did I go to the tax office?"
        )
    )
    assert not started.context.long_term.degraded


@pytest.mark.parametrize(
    ("text", "reaches", "expected"),
    [
        ("I went to the museum yesterday", True, (datetime(2023, 5, 7, 13, 56, tzinfo=UTC), "day")),
        (
            "Last August I told you about the trip",
            True,
            (datetime(2022, 8, 8, tzinfo=UTC), "month"),
        ),
        ("We met on Friday", True, (datetime(2023, 5, 5, tzinfo=UTC), "day")),
        (
            "May I ask you something? We moved in May",
            True,
            (datetime(2023, 5, 8, tzinfo=UTC), "month"),
        ),
        ("May I ask you something?", True, None),
        # A word an anchor needs, but no anchor: dateparser is not asked.
        ("this may help us now", False, None),
        ("we spent a week there, it was 4 years of work", False, None),
    ],
)
def test_which_texts_reach_dateparser_and_what_it_resolves(
    text: str, reaches: bool, expected: tuple[datetime, str] | None
) -> None:
    events = DateparserEvents()
    assert events.needs_resolving(text) is reaches
    got = events.resolve(text, SAID)
    assert (None if got is None else (got.at, got.period.value)) == expected
