"""memory_client.graphrag.integration, what GraphRAG's edited code calls, against a real server.

GraphRAG itself runs in tests/test_graphrag_run.py (opt-in: it needs GraphRAG's source). Here
the calls are made the way the edited `chat` handler makes them: `begin` with GraphRAG's user
Message, the agent's history, `answer_context` from a worker thread (where GraphRAG runs its
agent), `complete` with the reply Message; the stock UI's graph-less routes over HTTP.
"""

from __future__ import annotations

import base64
import json
import logging
import uuid
from collections.abc import AsyncIterator
from typing import Annotated, Any

import anyio
import httpx
import pytest
from fastapi import Depends, FastAPI, HTTPException
from fastapi.security import HTTPBasic, HTTPBasicCredentials
from pydantic import BaseModel

from memory_client.graphrag.integration import (
    GraphRAGIntegration,
    answer_context,
    username_from_basic_auth,
)
from memory_client.graphrag.integration.followup import standalone_question
from memory_client.graphrag.prompts import MEMORY_NOTE, SUMMARY_QUERY

from conftest import RunningServer, ServerFactory, new_id
from fake_openai import FakeLLM

_basic = HTTPBasic()
GRAPHS = ["Finance", "Retail"]


class Message(BaseModel):
    """GraphRAG's Message (common/py_schemas/schemas.py at cc4eed1), the fields the chat path
    sets."""

    conversation_id: str
    message_id: str
    parent_id: str | None = None
    model: str | None = None
    content: str | None = None
    role: str | None = None
    response_time: float | None = None


def ui_basic_auth(
    creds: Annotated[HTTPBasicCredentials, Depends(_basic)],
) -> tuple[list[str], HTTPBasicCredentials]:
    """GraphRAG's dependency's shape: (the graphs the user may use, the credentials)."""
    if creds.password != "pw":
        raise HTTPException(status_code=401, detail="Incorrect username or password")
    return GRAPHS, creds


def _basic_token(user: str) -> str:
    return base64.b64encode(f"{user}:pw".encode()).decode()


def _headers(user: str) -> dict[str, str]:
    return {"Authorization": f"Basic {_basic_token(user)}"}


def _server_config(address: str | None) -> dict[str, Any]:
    section: dict[str, str | None] = {"chat_history_api": None}
    if address is not None:
        section["memory_service_address"] = address
    return {"db_config": {}, "llm_config": {}, "graphrag_config": section}


def _question(conversation_id: str, text: str) -> Message:
    return Message(
        conversation_id=conversation_id, message_id=str(uuid.uuid4()), content=text, role="user"
    )


def _reply(turn_question: Message, text: str) -> Message:
    return Message(
        conversation_id=turn_question.conversation_id,
        message_id=str(uuid.uuid4()),
        parent_id=turn_question.message_id,
        model="gpt-4o-mini",
        content=text,
        role="system",
        response_time=1.5,
    )


@pytest.fixture
async def graphrag_app(memory: RunningServer) -> AsyncIterator[tuple[FastAPI, GraphRAGIntegration]]:
    app = FastAPI()

    @app.get("/ui/conversation/{conversation_id}")
    def graphrags_own_proxy(conversation_id: str) -> dict[str, str]:
        return {"chat-history": "should not be reached"}

    integration = GraphRAGIntegration()
    integration.install(app, _server_config(memory.address), current_user=ui_basic_auth)
    async with app.router.lifespan_context(app):
        yield app, integration


@pytest.fixture
async def ui(graphrag_app: tuple[FastAPI, GraphRAGIntegration]) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=graphrag_app[0])
    async with httpx.AsyncClient(transport=transport, base_url="http://graphrag") as client:
        yield client


async def test_a_turn_the_way_graphrags_chat_handler_makes_it(
    graphrag_app: tuple[FastAPI, GraphRAGIntegration], ui: httpx.AsyncClient
) -> None:
    _, memory = graphrag_app
    user, conversation_id = new_id("alice"), new_id()
    auth = _basic_token(user)

    first = _question(conversation_id, "Which accounts share device D-77 with account 4471?")
    turn = await memory.begin(auth, "Finance", first, [])
    assert turn.turn is not None and turn.history == []
    # Nothing remembered yet: the answer prompt gets GraphRAG's context as it was, not an
    # empty memory heading.
    assert await anyio.to_thread.run_sync(answer_context, {"result": 1}) == {"result": 1}
    reply = _reply(first, "Accounts 5120 and 9983 share device D-77 with it.")
    await memory.complete(turn, reply)

    second = _question(conversation_id, "Which of them was flagged?")
    turn = await memory.begin(auth, "Finance", second, [])
    earlier = {"query": first.content, "response": reply.content}
    assert turn.history == [earlier]
    # GraphRAG runs its agent in a worker thread (asyncer.asyncify): the turn is seen there,
    # for every shape of context GraphRAG's answer branches pass.
    for graph_context in (
        '{"flagged": ["9983"]}',
        {"result": {"flagged": ["9983"]}},
        [{"flagged": "9983"}],
    ):
        prompt_context = await anyio.to_thread.run_sync(answer_context, graph_context)
        assert isinstance(prompt_context, str)
        assert prompt_context.index("flagged") < prompt_context.index(MEMORY_NOTE)
        assert prompt_context.index(MEMORY_NOTE) < prompt_context.index("Memory context")
        assert "Accounts 5120 and 9983 share device D-77" in prompt_context
    assert json.dumps({"flagged": ["9983"]}) in answer_context({"flagged": ["9983"]})
    answer = _reply(second, "9983 was flagged.")
    await memory.complete(turn, answer)
    # After the turn the answer step is back to GraphRAG's own behaviour.
    assert answer_context({"x": 1}) == {"x": 1}

    # The UI's thumbs up on the reply, on the stock UI's path (no graph in it).
    body = {**answer.model_dump(), "feedback": 1}
    saved = await ui.post("/ui/feedback", json=body, headers=_headers(user))
    assert saved.status_code == 200, saved.text
    got = await ui.get(f"/ui/conversation/{conversation_id}", headers=_headers(user))
    assert got.status_code == 200
    messages = got.json()
    assert [m["message_id"] for m in messages] == [
        first.message_id,
        reply.message_id,
        second.message_id,
        answer.message_id,
    ]
    assert [m["feedback"] for m in messages] == [0, 0, 0, 1]
    assert messages[3]["parent_id"] == second.message_id
    assert messages[3]["response_time"] == 1.5 and messages[3]["model"] == "gpt-4o-mini"

    listed = await ui.get(f"/ui/user/{user}", headers=_headers(user))
    assert [(c["conversation_id"], c["graphname"]) for c in listed.json()] == [
        (conversation_id, "Finance")
    ]
    # Graph-scoped routes are there too.
    scoped = await ui.get(f"/ui/Finance/conversation/{conversation_id}", headers=_headers(user))
    assert scoped.json() == messages


async def test_stock_routes_answer_as_the_stock_ui_expects(
    graphrag_app: tuple[FastAPI, GraphRAGIntegration], ui: httpx.AsyncClient
) -> None:
    _, memory = graphrag_app
    alice, mallory, conversation_id = new_id("alice"), new_id("mallory"), new_id()
    question = _question(conversation_id, "Alice's question")
    turn = await memory.begin(_basic_token(alice), "Retail", question, [])
    reply = _reply(question, "Alice's answer")
    await memory.complete(turn, reply)

    # An unknown conversation is an empty list (the stock UI maps over the body).
    unknown = await ui.get(f"/ui/conversation/{new_id()}", headers=_headers(alice))
    assert (unknown.status_code, unknown.json()) == (200, [])
    # Another user sees none of it and cannot touch it.
    theirs = await ui.get(f"/ui/conversation/{conversation_id}", headers=_headers(mallory))
    assert theirs.json() == []
    assert (await ui.get(f"/ui/user/{alice}", headers=_headers(mallory))).status_code == 403
    assert (await ui.get(f"/ui/user/{mallory}", headers=_headers(mallory))).json() == []
    stolen = await ui.post(
        "/ui/feedback",
        json={"conversation_id": conversation_id, "message_id": reply.message_id, "feedback": 2},
        headers=_headers(mallory),
    )
    assert stolen.status_code == 404
    assert (
        await ui.delete(f"/ui/conversation/{conversation_id}", headers=_headers(mallory))
    ).status_code == 404
    assert (await ui.get("/ui/user/x", headers={"Authorization": "Basic eDp5"})).status_code == 401

    gone = await ui.delete(f"/ui/conversation/{conversation_id}", headers=_headers(alice))
    assert gone.json()["deleted_messages"] == 2
    assert (
        await ui.get(f"/ui/conversation/{conversation_id}", headers=_headers(alice))
    ).json() == []


async def test_the_agents_history_keeps_the_summary_through_graphrags_cut(
    start_server: ServerFactory,
) -> None:
    server = await start_server(stm_context_tokens=256, fact_extract_async=False)
    memory = GraphRAGIntegration()
    memory.configure(address=server.address)
    await memory.start()
    try:
        user, conversation_id = new_id("alice"), new_id()
        turn = None
        for i in range(12):
            question = _question(conversation_id, f"Question {i} about merchant M-{i} volumes?")
            turn = await memory.begin(_basic_token(user), "Finance", question, [])
            await memory.complete(turn, _reply(question, f"Merchant M-{i} moved {i}00 units."))
        assert turn is not None and turn.turn is not None
        assert turn.turn.context.summary, "the conversation should have been summarized by now"
        # GraphRAG's run_agent keeps conversation_history[-4:] (ui.py:276).
        cut = turn.history[-4:]
        assert cut == turn.history and len(cut) <= 4
        assert cut[0]["query"] == SUMMARY_QUERY
        assert cut[0]["response"] == turn.turn.context.summary
    finally:
        await memory.close()


async def test_without_a_memory_service_graphrag_runs_as_before() -> None:
    app = FastAPI()
    before = list(app.router.routes)
    memory = GraphRAGIntegration()
    memory.install(app, _server_config(None), current_user=ui_basic_auth)
    assert not memory.enabled and app.router.routes == before
    async with app.router.lifespan_context(app):
        history = [{"query": f"q{i}", "response": f"a{i}"} for i in range(6)]
        turn = await memory.begin(_basic_token("alice"), "Finance", _question("c", "Hi?"), history)
        assert turn.turn is None and turn.history == history[-4:]
        assert answer_context({"result": 1}) == {"result": 1}
        await memory.complete(turn, _reply(_question("c", "Hi?"), "Hello."))


async def test_a_memory_outage_answers_without_memory(
    caplog: pytest.LogCaptureFixture,
) -> None:
    memory = GraphRAGIntegration()
    memory.configure(address="127.0.0.1:9", timeout_s=1.0, retries=0)
    await memory.start()
    try:
        question = _question(new_id(), "my secret plan is X")
        with caplog.at_level(logging.WARNING, logger="memory_client.graphrag.integration"):
            turn = await memory.begin(_basic_token("alice"), "Finance", question, [])
            await memory.complete(turn, _reply(question, "ok"))
        assert turn.turn is None and turn.history == []
        assert answer_context("graph evidence") == "graph evidence"
        assert "StartTurn failed (StatusCode.UNAVAILABLE)" in caplog.text
        assert "secret plan" not in caplog.text
    finally:
        await memory.close()


def test_usr_auth_is_graphrags_base64_pair() -> None:
    assert username_from_basic_auth(_basic_token("alice")) == "alice"
    for bad in ("not base64!", base64.b64encode(b"no-colon").decode(), ""):
        with pytest.raises(ValueError):
            username_from_basic_auth(bad)


async def test_a_follow_up_question_made_standalone_by_the_llm(
    memory: RunningServer, fake_llm: FakeLLM
) -> None:
    """The rewrite goes to an OpenAI-compatible endpoint as GraphRAG's LLM would send it; the
    prompt holds the earlier turn, and failures or rambling replies keep the question."""
    integration = GraphRAGIntegration()
    integration.configure(address=memory.address)
    await integration.start()

    def complete(prompt: str) -> str:
        body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": prompt}]}
        reply = httpx.post(f"{fake_llm.base_url}/chat/completions", json=body, timeout=10)
        reply.raise_for_status()
        return str(reply.json()["choices"][0]["message"]["content"])

    try:
        user, conversation_id = new_id("alice"), new_id()
        first = _question(conversation_id, "Which accounts share device D-77 with 4471?")
        turn = await integration.begin(_basic_token(user), "Finance", first, [])
        # No history yet: no call.
        assert await standalone_question(turn, str(first.content), complete) == first.content
        assert fake_llm.requests == []
        await integration.complete(turn, _reply(first, "Accounts 5120 and 9983."))

        second = _question(conversation_id, "Which of them was flagged?")
        turn = await integration.begin(_basic_token(user), "Finance", second, [])
        fake_llm.reply = "Which of accounts 5120 and 9983 was flagged?"
        rewritten = await standalone_question(turn, str(second.content), complete)
        assert rewritten == "Which of accounts 5120 and 9983 was flagged?"
        [request] = fake_llm.requests
        prompt = request["body"]["messages"][0]["content"]
        assert "Accounts 5120 and 9983." in prompt and "Which of them was flagged?" in prompt

        fake_llm.reply = "Sure! Here is the rewrite:\nWhich of 5120 and 9983 was flagged?"
        assert await standalone_question(turn, str(second.content), complete) == second.content
        fake_llm.mode = "status500"
        assert await standalone_question(turn, str(second.content), complete) == second.content
        await integration.complete(turn, _reply(second, "9983."))
    finally:
        await integration.close()
