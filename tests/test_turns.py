"""Short-term memory through the real gRPC surface."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from memory_client.v1 import memory_pb2 as pb
from memory_server.tokens import TiktokenCounter

from conftest import RunningServer, ServerFactory, all_messages, assert_eventually, new_id
from fake_openai import FakeLLM


async def _turn(
    memory: RunningServer,
    scope: dict[str, str],
    conversation_id: str,
    question: str,
    answer: str,
) -> tuple[pb.StartTurnResponse, pb.CompleteTurnResponse]:
    started = await memory.stub.StartTurn(
        pb.StartTurnRequest(**scope, conversation_id=conversation_id, content=question)
    )
    completed = await memory.stub.CompleteTurn(
        pb.CompleteTurnRequest(
            **scope,
            conversation_id=conversation_id,
            content=answer,
            model="gpt-4o-mini",
            parent_id=started.message.message_id,
            response_time_seconds=1.25,
        )
    )
    return started, completed


async def test_follow_up_sees_the_earlier_exchange(memory: RunningServer, scope: dict[str, str]):
    conversation = new_id()
    first, reply = await _turn(
        memory,
        scope,
        conversation,
        "Which accounts share a device with account 4471?",
        "Accounts 5120 and 9983 share device D-77 with account 4471.",
    )
    assert first.conversation_created
    assert first.context.recent_messages == []  # the in-flight message is not echoed back
    assert "not graph evidence" in first.context.rendered

    follow_up = await memory.stub.StartTurn(
        pb.StartTurnRequest(
            **scope,
            conversation_id=conversation,
            content="And which of them was flagged last week?",
        )
    )
    assert not follow_up.conversation_created
    recent = follow_up.context.recent_messages
    assert [m.message_id for m in recent] == [first.message.message_id, reply.message.message_id]
    assert [m.role for m in recent] == [pb.ROLE_USER, pb.ROLE_ASSISTANT]
    assert "device D-77" in follow_up.context.rendered
    assert "flagged last week" not in follow_up.context.rendered
    counter = TiktokenCounter()
    assert follow_up.context.total_tokens == counter.count(follow_up.context.rendered)
    assert follow_up.context.recent_tokens == sum(m.tokens for m in recent)
    assert reply.message.parent_id == first.message.message_id
    assert reply.message.model == "gpt-4o-mini"
    assert reply.message.response_time_seconds == pytest.approx(1.25)

    # GetContext builds the same view without writing anything.
    before = await all_messages(memory.stub, scope, conversation)
    context = await memory.stub.GetContext(
        pb.GetContextRequest(**scope, conversation_id=conversation, question="anything else?")
    )
    assert context.conversation_exists
    assert [m.content for m in context.context.recent_messages][-1].startswith("And which")
    assert len(await all_messages(memory.stub, scope, conversation)) == len(before) == 3


async def test_context_is_per_conversation_and_per_user(
    memory: RunningServer, scope: dict[str, str]
):
    conversation = new_id()
    await _turn(memory, scope, conversation, "My favourite graph is Finance.", "Noted.")
    other_chat = await memory.stub.StartTurn(
        pb.StartTurnRequest(**scope, conversation_id=new_id(), content="hello")
    )
    assert other_chat.context.recent_messages == []
    stranger = {"username": scope["username"] + "-other", "graphname": scope["graphname"]}
    same_id_other_user = await memory.stub.StartTurn(
        pb.StartTurnRequest(**stranger, conversation_id=conversation, content="hello")
    )
    # Another user reusing the id gets a conversation of their own, not a peek at this one.
    assert same_id_other_user.conversation_created
    assert same_id_other_user.context.recent_messages == []


async def test_two_hundred_turns_stay_within_budget_and_keep_every_row(
    start_server: ServerFactory, scope: dict[str, str]
):
    budget = 2000
    memory = await start_server(stm_context_tokens=budget, fact_extract_async=False)
    conversation = new_id()
    filler = (
        "We traced the transfers between the shell companies through the ledger graph and "
        "compared their timing against the flagged merchant accounts in the same region"
    )
    for i in range(200):
        started, completed = await _turn(
            memory,
            scope,
            conversation,
            f"Question {i}: topic-{i}-q. {filler} for case {i}?",
            f"Answer {i}: topic-{i}-a. {filler}; case {i} looks consistent.",
        )
        assert started.context.total_tokens <= budget
        assert started.context.budget_tokens == budget
        assert completed.compacted_inline
    context = (
        await memory.stub.GetContext(pb.GetContextRequest(**scope, conversation_id=conversation))
    ).context
    assert context.total_tokens <= budget
    assert context.summary, "old turns were folded into a summary"
    assert "topic-0-q" in context.summary, "the summary covers the oldest turn"
    assert context.summary_tokens <= budget // 4
    # The watermark points at a stored message older than every exact turn in the window.
    stored = await all_messages(memory.stub, scope, conversation)
    assert len(stored) == 400, "compaction never deletes message rows"
    ids = [m.message_id for m in stored]
    watermark = ids.index(context.summary_through_message_id)
    first_recent = ids.index(context.recent_messages[0].message_id)
    assert watermark < first_recent
    assert context.recent_messages[-1].message_id == ids[-1]
    assert context.omitted_messages == 0  # inline compaction keeps the window gap-free


async def test_async_compaction_catches_up_behind_the_turn(
    start_server: ServerFactory, scope: dict[str, str]
):
    memory = await start_server(stm_context_tokens=512, fact_extract_async=True)
    conversation = new_id()
    long_text = "graph traversal over customer accounts and their devices " * 12
    for i in range(12):
        _, completed = await _turn(
            memory, scope, conversation, f"q{i} {long_text}", f"a{i} {long_text}"
        )
        assert not completed.compacted_inline

    async def summarized() -> bool:
        context = (
            await memory.stub.GetContext(
                pb.GetContextRequest(**scope, conversation_id=conversation)
            )
        ).context
        return bool(context.summary) and context.total_tokens <= 512

    await assert_eventually(summarized, what="background compaction")


async def test_retry_with_same_message_id_is_idempotent(
    memory: RunningServer, scope: dict[str, str]
):
    conversation = new_id()
    await _turn(memory, scope, conversation, "first question", "first answer")
    request = pb.StartTurnRequest(
        **scope, conversation_id=conversation, content="second question", message_id="m-2"
    )
    first = await memory.stub.StartTurn(request)
    again = await memory.stub.StartTurn(request)
    assert again.message.message_id == first.message.message_id == "m-2"
    assert again.message.created_at == first.message.created_at
    assert again.context.recent_messages == first.context.recent_messages
    assert len(await all_messages(memory.stub, scope, conversation)) == 3

    with pytest.raises(grpc.aio.AioRpcError) as err:
        await memory.stub.StartTurn(
            pb.StartTurnRequest(
                **scope, conversation_id=conversation, content="something else", message_id="m-2"
            )
        )
    assert err.value.code() == grpc.StatusCode.ALREADY_EXISTS
    assert "message_id" in (err.value.details() or "")


async def test_complete_turn_needs_an_existing_conversation_and_parent(
    memory: RunningServer, scope: dict[str, str]
):
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await memory.stub.CompleteTurn(
            pb.CompleteTurnRequest(**scope, conversation_id=new_id(), content="orphan reply")
        )
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    assert "conversation_id" in (err.value.details() or "")

    conversation = new_id()
    await _turn(memory, scope, conversation, "q", "a")
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await memory.stub.CompleteTurn(
            pb.CompleteTurnRequest(
                **scope, conversation_id=conversation, content="reply", parent_id="no-such-message"
            )
        )
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    assert "parent_id" in (err.value.details() or "")
    assert len(await all_messages(memory.stub, scope, conversation)) == 2


async def test_get_context_of_unknown_conversation_is_empty(
    memory: RunningServer, scope: dict[str, str]
):
    response = await memory.stub.GetContext(
        pb.GetContextRequest(**scope, conversation_id=new_id(), question="hi")
    )
    assert not response.conversation_exists
    assert response.context.recent_messages == []
    assert response.context.total_tokens > 0  # the header alone


async def test_llm_summarizer_writes_the_summary_when_configured(
    start_server: ServerFactory, scope: dict[str, str], fake_llm: FakeLLM
):
    fake_llm.reply = "The user investigates shell companies in the Finance graph."
    memory = await start_server(
        stm_context_tokens=512,
        fact_extract_async=False,
        llm_base_url=fake_llm.base_url,
        llm_model="summarizer-test",
        llm_api_key="sk-test",
    )
    conversation = new_id()
    text = "which transfers link the shell companies to the flagged merchants " * 8
    for i in range(6):
        await _turn(memory, scope, conversation, f"q{i} {text}", f"a{i} {text}")
    context = (
        await memory.stub.GetContext(pb.GetContextRequest(**scope, conversation_id=conversation))
    ).context
    assert context.summary == fake_llm.reply
    assert fake_llm.requests, "the configured endpoint was called"
    request = fake_llm.requests[0]
    assert request["path"] == "/v1/chat/completions"
    assert request["body"]["model"] == "summarizer-test"
    assert request["headers"]["Authorization"] == "Bearer sk-test"
    assert "q0" in json.dumps(request["body"]["messages"])


async def test_a_slow_summarizer_does_not_hold_up_the_users_next_turn(
    start_server: ServerFactory, scope: dict[str, str], fake_llm: FakeLLM
):
    fake_llm.mode = "slow"  # the endpoint answers only when released (or after 10 s)
    memory = await start_server(
        stm_context_tokens=512, llm_base_url=fake_llm.base_url, llm_model="slow-model"
    )
    conversation = new_id()
    text = "which transfers link the shell companies to the flagged merchants " * 8
    for i in range(6):
        await _turn(memory, scope, conversation, f"q{i} {text}", f"a{i} {text}")

    async def summarizing() -> bool:
        return bool(fake_llm.requests)

    await assert_eventually(summarizing, what="a compaction waiting on the LLM")
    # Writes of the same user and graph go through the same actor; the compaction is not on it.
    started = await asyncio.wait_for(
        memory.stub.StartTurn(
            pb.StartTurnRequest(**scope, conversation_id=conversation, content="still there?")
        ),
        timeout=5,
    )
    assert started.context.total_tokens <= 512
    fake_llm.mode = "ok"
    fake_llm.release.set()

    async def summarized() -> bool:
        context = (
            await memory.stub.GetContext(
                pb.GetContextRequest(**scope, conversation_id=conversation)
            )
        ).context
        return context.summary == fake_llm.reply

    await assert_eventually(summarized, what="the LLM summary stored after release")


async def test_turns_keep_a_replayed_created_at(memory: RunningServer, scope: dict[str, str]):
    # Replays (bench/locomo_learning.py) give each message its original time.
    conversation_id = new_id()
    asked, answered = Timestamp(), Timestamp()
    asked.FromDatetime(datetime(2023, 5, 8, 13, 56, tzinfo=UTC))
    answered.FromDatetime(datetime(2023, 5, 8, 13, 57, tzinfo=UTC))
    started = await memory.stub.StartTurn(
        pb.StartTurnRequest(
            **scope, conversation_id=conversation_id, content="Hello.", created_at=asked
        )
    )
    done = await memory.stub.CompleteTurn(
        pb.CompleteTurnRequest(
            **scope,
            conversation_id=conversation_id,
            content="Hi.",
            parent_id=started.message.message_id,
            created_at=answered,
        )
    )
    assert (started.message.created_at, done.message.created_at) == (asked, answered)
    stored = await all_messages(memory.stub, scope, conversation_id)
    assert [m.created_at for m in stored] == [asked, answered]


async def test_a_bad_created_at_names_the_field(memory: RunningServer, scope: dict[str, str]):
    bad = Timestamp(seconds=0, nanos=-1)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await memory.stub.StartTurn(
            pb.StartTurnRequest(**scope, conversation_id=new_id(), content="Hi.", created_at=bad)
        )
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "created_at" in (caught.value.details() or "")
