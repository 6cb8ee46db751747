"""Long-term memory end to end over gRPC: plant, recall across conversations, isolation,
bitemporal updates, secrets, lazy loading, erasure."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from memory_client.v1 import memory_pb2 as pb
from memory_server.tokens import TiktokenCounter

from conftest import RunningServer, ServerFactory, assert_eventually, new_id
from tg_index import server_settings
from tg_server import serve_tigergraph

PLANT = "From now on always answer in French; I prefer concise bullet points."


async def _turn(
    memory: RunningServer, scope: dict[str, str], conversation: str, question: str, answer: str
) -> pb.StartTurnResponse:
    started = await memory.stub.StartTurn(
        pb.StartTurnRequest(**scope, conversation_id=conversation, content=question)
    )
    await memory.stub.CompleteTurn(
        pb.CompleteTurnRequest(
            **scope,
            conversation_id=conversation,
            content=answer,
            parent_id=started.message.message_id,
        )
    )
    return started


async def _live(memory: RunningServer, scope: dict[str, str]) -> list[pb.Fact]:
    return list((await memory.stub.ListFacts(pb.ListFactsRequest(**scope))).facts)


async def _indexed(memory: RunningServer) -> None:
    """Waits until the outbox actor has moved every committed change into the index."""
    outbox = memory.server.outbox
    assert outbox is not None
    outbox.facts_changed()

    async def caught_up() -> bool:
        return (await outbox.backlog()).waiting == 0

    await assert_eventually(caught_up, what="the vector index caught up")


@pytest.fixture(params=["pgvector", "tigergraph"])
async def memory(
    request: pytest.FixtureRequest, start_server: ServerFactory
) -> AsyncIterator[RunningServer]:
    """The same acceptance runs against both vector indexes; TigerGraph is the loopback
    stand-in that speaks its wire protocol (tests/tg_server.py)."""
    if request.param == "pgvector":
        # Extraction before the reply returns, so assertions need no polling.
        yield await start_server(fact_extract_async=False)
        return
    with serve_tigergraph() as tg:
        yield await start_server(
            fact_extract_async=False,
            **server_settings(tg),
        )


async def test_preference_planted_in_one_chat_is_recalled_in_another(
    memory: RunningServer, scope: dict[str, str]
):
    await _turn(memory, scope, new_id(), PLANT, "D'accord.")
    facts = await _live(memory, scope)
    texts = " | ".join(f.text for f in facts)
    assert "French" in texts and "bullet points" in texts, texts
    assert all(f.conversation_id and f.extractor for f in facts)
    await _indexed(memory)

    chat_b = new_id()
    started = await memory.stub.StartTurn(
        pb.StartTurnRequest(
            **scope,
            conversation_id=chat_b,
            content="How should you format answers and which language should you use for me?",
        )
    )
    recalled = " | ".join(f.text for f in started.context.long_term.facts)
    assert "French" in recalled, recalled
    assert started.context.recent_messages == []  # no STM from chat A
    assert "French" in started.context.rendered
    assert all(0.0 <= f.score <= 1.0 for f in started.context.long_term.facts)
    # Each line carries the date it was stated (UTC), the one valid_from holds.
    section = "### Long-term memory about the user\n" + "".join(
        f"- {f.text} (stated {f.valid_from.ToDatetime(UTC):%Y-%m-%d})\n"
        for f in started.context.long_term.facts
    )
    assert section + "\n" in started.context.rendered
    assert started.context.long_term.tokens == TiktokenCounter().count(section + "\n")

    for other in (
        {"username": scope["username"] + "-other", "graphname": scope["graphname"]},
        {"username": scope["username"], "graphname": scope["graphname"] + "Other"},
    ):
        theirs = await memory.stub.StartTurn(
            pb.StartTurnRequest(
                **other,
                conversation_id=chat_b,
                content="How should you format answers and which language should you use?",
            )
        )
        assert list(theirs.context.long_term.facts) == []
        assert await _live(memory, other) == []


async def test_a_changed_preference_supersedes_and_as_of_sees_the_old_one(
    memory: RunningServer, scope: dict[str, str]
):
    await _turn(memory, scope, new_id(), "I prefer concise bullet points.", "Noted.")
    [before] = await _live(memory, scope)
    planted_at = datetime.now(UTC)
    await asyncio.sleep(0.01)
    await _turn(memory, scope, new_id(), "Actually I prefer long explanations now.", "Sure.")
    [after] = await _live(memory, scope)
    assert after.fact_id == before.fact_id, "an UPDATE keeps the fact's identity"
    assert "long explanations" in after.text
    fact = await memory.stub.GetFact(pb.GetFactRequest(**scope, fact_id=before.fact_id))
    assert fact.current.version_id == after.version_id
    old = [v for v in fact.versions if v.version_id == before.version_id]
    assert old and old[0].HasField("superseded_at"), "the old version is closed, not overwritten"
    assert old[0].text == before.text
    history = await memory.stub.GetFactHistory(
        pb.GetFactHistoryRequest(**scope, fact_id=before.fact_id)
    )
    assert [e.event for e in history.events] == ["ADD", "UPDATE"]
    await _indexed(memory)

    then = Timestamp()
    then.FromDatetime(planted_at)
    as_of = await memory.stub.SearchFacts(
        pb.SearchFactsRequest(
            **scope,
            query="how long should answers be",
            threshold=0.0,
            as_of_transaction_time=then,
            as_of_valid_time=then,
        )
    )
    assert [r.fact.text for r in as_of.results] == [before.text]
    now = await memory.stub.SearchFacts(
        pb.SearchFactsRequest(**scope, query="how long should answers be", threshold=0.0)
    )
    assert [r.fact.text for r in now.results] == [after.text]


async def test_secrets_never_become_facts_vectors_or_logs(
    memory: RunningServer, scope: dict[str, str], caplog: pytest.LogCaptureFixture
):
    key = "sk-proj-" + "Zx8Qw2Lm9Tr4Vb7Nc1Kd6Hs3Jf5Gp0Ya"
    password = "Tr0ub4dor&3xyz!"
    caplog.set_level(logging.DEBUG)
    await _turn(
        memory,
        scope,
        new_id(),
        f"My OpenAI key is {key}. My password is {password}. I prefer dark mode dashboards.",
        "Noted your preference.",
    )
    facts = await _live(memory, scope)
    assert [f.text for f in facts] and all(
        key not in f.text and password not in f.text for f in facts
    )
    assert any("dark mode" in f.text for f in facts)
    await _indexed(memory)
    found = await memory.stub.SearchFacts(
        pb.SearchFactsRequest(**scope, query=f"key {key} password {password}", threshold=0.0)
    )
    assert all(key not in r.fact.text and password not in r.fact.text for r in found.results)
    assert key not in caplog.text and password not in caplog.text


_FIRST_MESSAGE = """
import asyncio, json, sys, grpc
from memory_client.v1 import memory_pb2 as pb, memory_pb2_grpc as pb_grpc
from memory_server.main import MemoryServer
from memory_server.settings import load_settings

async def main():
    settings = load_settings(overrides={"database_url": sys.argv[1],
                                        "listen_address": "127.0.0.1:0",
                                        "fact_extract_async": False})
    async with MemoryServer(settings) as server:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            stub = pb_grpc.MemoryServiceStub(channel)
            scope = {"username": sys.argv[2], "graphname": "Finance"}
            for text in ("How many vertex types does the Finance graph have?", "And edges?"):
                started = await stub.StartTurn(pb.StartTurnRequest(
                    **scope, conversation_id="c1", content=text))
                await stub.CompleteTurn(pb.CompleteTurnRequest(
                    **scope, conversation_id="c1", content="It has 12.",
                    parent_id=started.message.message_id))
        print(json.dumps({
            "recalled": len(started.context.long_term.facts),
            "embedder_loaded": server.embedder.loaded,
            "index_loaded": server.index.loaded,
            "mem0": any(m == "mem0" or m.startswith("mem0.") for m in tuple(sys.modules)),
            "onnxruntime": "onnxruntime" in sys.modules,
        }))

asyncio.run(main())
"""


async def test_first_message_without_facts_loads_no_model_index_or_mem0(
    database_url: str, scope: dict[str, str]
):
    # A process of its own: other tests in this one may have loaded the model or mem0.
    result = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", _FIRST_MESSAGE, database_url, scope["username"]],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report == {
        "recalled": 0,
        "embedder_loaded": False,
        "index_loaded": False,
        "mem0": False,
        "onnxruntime": False,
    }


async def test_as_of_filters_before_ranking(memory: RunningServer, scope: dict[str, str]):
    stub = memory.stub
    retracted = []
    for flavour in ("oat", "soy", "almond", "whole", "skim"):
        added = await stub.AddFact(
            pb.AddFactRequest(**scope, text=f"Likes coffee with {flavour} milk", kind="preference")
        )
        retracted.append(added.fact.fact_id)
    live = await stub.AddFact(pb.AddFactRequest(**scope, text="Drinks coffee black"))
    for fact_id in retracted:
        await stub.DeleteFact(pb.DeleteFactRequest(**scope, fact_id=fact_id))
    await _indexed(memory)
    # The five retracted versions are closer to the query; a top-1 taken before filtering
    # would come back empty.
    result = await stub.SearchFacts(
        pb.SearchFactsRequest(**scope, query="coffee with milk", top_k=1, threshold=0.0)
    )
    assert [r.fact.fact_id for r in result.results] == [live.fact.fact_id]


async def test_manual_facts_and_scope_isolation(memory: RunningServer, scope: dict[str, str]):
    stub = memory.stub
    added = await stub.AddFact(pb.AddFactRequest(**scope, text="Works in the fraud team"))
    assert added.fact.extractor == "manual" and added.fact.kind == "other"
    updated = await stub.UpdateFact(
        pb.UpdateFactRequest(**scope, fact_id=added.fact.fact_id, text="Works in the AML team")
    )
    assert updated.fact.fact_id == added.fact.fact_id
    assert updated.fact.version_id != added.fact.version_id
    intruder = {"username": scope["username"] + "x", "graphname": scope["graphname"]}
    for call in (
        stub.GetFact(pb.GetFactRequest(**intruder, fact_id=added.fact.fact_id)),
        stub.GetFactHistory(pb.GetFactHistoryRequest(**intruder, fact_id=added.fact.fact_id)),
        stub.UpdateFact(pb.UpdateFactRequest(**intruder, fact_id=added.fact.fact_id, text="x")),
        stub.DeleteFact(pb.DeleteFactRequest(**intruder, fact_id=added.fact.fact_id)),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await call
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
    await stub.DeleteFact(pb.DeleteFactRequest(**scope, fact_id=added.fact.fact_id, ended=True))
    assert await _live(memory, scope) == []
    fact = await stub.GetFact(pb.GetFactRequest(**scope, fact_id=added.fact.fact_id))
    assert not fact.HasField("current") and len(fact.versions) >= 3
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.AddFact(pb.AddFactRequest(**scope, text="x", kind="opinion"))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "kind" in (err.value.details() or "")


async def test_forget_scope_erases_everything(memory: RunningServer, scope: dict[str, str]):
    conversation = new_id()
    await _turn(memory, scope, conversation, "I prefer graphs drawn left to right.", "Noted.")
    [fact] = await _live(memory, scope)
    await _indexed(memory)
    assert memory.server.index is not None
    scope_hash = _scope_hash(scope)
    assert await memory.server.index.count(scope_hash) > 0

    counts = await memory.stub.ForgetScope(
        pb.ForgetScopeRequest(**scope, include_conversations=True)
    )
    assert counts.facts == 1 and counts.messages == 2
    await _indexed(memory)
    assert await memory.server.index.count(scope_hash) == 0
    assert await _live(memory, scope) == []
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await memory.stub.GetFactHistory(pb.GetFactHistoryRequest(**scope, fact_id=fact.fact_id))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await memory.stub.GetConversation(
            pb.GetConversationRequest(**scope, conversation_id=conversation)
        )
    assert err.value.code() == grpc.StatusCode.NOT_FOUND


async def test_retracting_what_was_never_said_changes_nothing(
    memory: RunningServer, scope: dict[str, str]
):
    await memory.stub.AddFact(pb.AddFactRequest(**scope, text="Works in the fraud team"))
    await _turn(memory, scope, new_id(), "Forget that I like jazz.", "Done.")
    assert [f.text for f in await _live(memory, scope)] == ["Works in the fraud team"]
    await _turn(memory, scope, new_id(), "I like jazz. Forget that I like jazz.", "Done.")
    assert [f.text for f in await _live(memory, scope)] == ["Works in the fraud team"]


async def test_background_extraction_lands_after_the_reply(
    start_server: ServerFactory, scope: dict[str, str]
):
    memory = await start_server(fact_extract_async=True)
    await _turn(memory, scope, new_id(), "My timezone is CET.", "Got it.")

    async def learned() -> bool:
        return any("CET" in f.text for f in await _live(memory, scope))

    await assert_eventually(learned, what="background extraction")


def _scope_hash(scope: dict[str, str]) -> str:
    from memory_server.memory.identity import scope_hash

    return scope_hash(scope["username"], scope["graphname"])
