"""The GraphRAG drop-in (memory_client.graphrag): the adapter and the FastAPI UI routes, against a
real server through the real client, with HTTP requests served in-process by the ASGI app."""

from __future__ import annotations

import base64
import secrets
import socket
from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any

import httpx
import pytest
from fastapi import Depends, FastAPI, HTTPException
from fastapi.security import HTTPBasic, HTTPBasicCredentials

from memory_client import AsyncMemoryClient, NotFoundError
from memory_client.graphrag import GraphRAGMemory, history_from_messages
from memory_client.graphrag.router import memory_ui_router

from conftest import RunningServer, new_id

_basic = HTTPBasic()


def _auth(username: str, password: str = "pw") -> dict[str, str]:
    token = base64.b64encode(f"{username}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def _app(memory: GraphRAGMemory) -> FastAPI:
    """A stand-in for GraphRAG's app: its own authentication, the memory router mounted."""

    def current_user(credentials: Annotated[HTTPBasicCredentials, Depends(_basic)]) -> str:
        if not secrets.compare_digest(credentials.password, "pw"):
            raise HTTPException(status_code=401, detail="bad credentials")
        return credentials.username

    app = FastAPI()
    app.include_router(memory_ui_router(memory, current_user))
    return app


@pytest.fixture
async def graphrag(memory: RunningServer) -> AsyncIterator[GraphRAGMemory]:
    async with GraphRAGMemory.connect(memory.address) as adapter:
        yield adapter


@pytest.fixture
async def ui(graphrag: GraphRAGMemory) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=_app(graphrag))
    async with httpx.AsyncClient(transport=transport, base_url="http://graphrag") as client:
        yield client


def _user() -> str:
    return new_id("alice")


async def test_turns_give_the_agent_the_earlier_exchange(graphrag: GraphRAGMemory) -> None:
    user, conversation_id = _user(), new_id()
    first = await graphrag.begin_turn(
        user, "Finance", conversation_id, "Which accounts share device D-77?"
    )
    assert first.conversation_created
    reply = await graphrag.complete_turn(
        first, "Accounts 5120 and 9983.", model="gpt-4o-mini", response_time_seconds=1.25
    )
    assert reply["role"] == "system"  # GraphRAG's name for the assistant's reply
    assert reply["parent_id"] == first.message_id
    assert reply["response_time"] == 1.25
    assert reply["model"] == "gpt-4o-mini"

    second = await graphrag.begin_turn(user, "Finance", conversation_id, "Which one is flagged?")
    assert not second.conversation_created
    assert "Which accounts share device D-77?" in second.context_block
    assert "Accounts 5120 and 9983." in second.context_block
    assert "Which one is flagged?" not in second.context_block
    peek = await graphrag.memory_context(user, "Finance", conversation_id, "And the device?")
    assert "Which one is flagged?" in peek  # GetContext stores nothing but sees every turn
    # What GraphRAG's agent takes: {"query", "response"} history items (agent.py:127-131),
    # the schema-mapping conversation, and the answer prompt's context with memory labelled.
    earlier = {"query": "Which accounts share device D-77?", "response": "Accounts 5120 and 9983."}
    assert second.history == [earlier]
    assert second.schema_mapping_conversation == [earlier]
    answer_context = second.generation_context('{"flagged": ["9983"]}')
    assert answer_context.index('"flagged"') < answer_context.index("Memory context")
    assert "Accounts 5120 and 9983." in answer_context
    stored = await graphrag.conversation_messages(user, "Finance", conversation_id)
    assert history_from_messages(stored) == [earlier]


async def test_history_in_chat_history_shapes(
    graphrag: GraphRAGMemory, ui: httpx.AsyncClient
) -> None:
    user, conversation_id = _user(), new_id()
    turn = await graphrag.begin_turn(
        user, "Finance", conversation_id, "Top merchants?", conversation_name="Merchants"
    )
    await graphrag.complete_turn(turn, "M-1 and M-2.")

    listed = await ui.get("/ui/Finance/user", headers=_auth(user))
    assert listed.status_code == 200
    [conversation] = listed.json()
    assert conversation["user_id"] == user
    assert conversation["conversation_id"] == conversation_id
    assert conversation["name"] == "Merchants"
    assert conversation["message_count"] == 2
    assert conversation["create_ts"].endswith("Z") and conversation["update_ts"].endswith("Z")

    got = await ui.get(f"/ui/Finance/conversation/{conversation_id}", headers=_auth(user))
    assert got.status_code == 200
    question, answer = got.json()
    assert set(question) == {
        "conversation_id",
        "message_id",
        "parent_id",
        "model",
        "content",
        "role",
        "response_time",
        "feedback",
        "comment",
        "create_ts",
    }
    assert (question["role"], question["content"], question["parent_id"]) == (
        "user",
        "Top merchants?",
        None,
    )
    assert (answer["role"], answer["content"], answer["parent_id"]) == (
        "system",
        "M-1 and M-2.",
        turn.message_id,
    )


async def test_feedback_route_saves_feedback_and_comment(
    graphrag: GraphRAGMemory, ui: httpx.AsyncClient
) -> None:
    user, conversation_id = _user(), new_id()
    turn = await graphrag.begin_turn(user, "Finance", conversation_id, "Total exposure?")
    reply = await graphrag.complete_turn(turn, "4.2M.")
    body = {
        "conversation_id": conversation_id,
        "message_id": reply["message_id"],
        "feedback": 2,
        "comment": "wrong currency",
        # The rest of GraphRAG's Message, as the UI sends it: accepted and ignored.
        "content": "4.2M.",
        "role": "system",
        "query_sources": {"function_call": "x"},
        "answered_question": True,
    }
    saved = await ui.post("/ui/Finance/feedback", json=body, headers=_auth(user))
    assert saved.status_code == 200, saved.text
    assert saved.json() == {"message": "feedback saved", "message_id": reply["message_id"]}
    messages = await graphrag.conversation_messages(user, "Finance", conversation_id)
    assert [(m["feedback"], m["comment"]) for m in messages] == [(0, ""), (2, "wrong currency")]

    cleared = await ui.post(
        "/ui/Finance/feedback",
        json={"message_id": reply["message_id"], "feedback": 0},
        headers=_auth(user),
    )
    assert cleared.status_code == 200
    messages = await graphrag.conversation_messages(user, "Finance", conversation_id)
    assert messages[1]["feedback"] == 0


async def test_routes_are_scoped_to_the_caller_and_the_graph(
    graphrag: GraphRAGMemory, ui: httpx.AsyncClient
) -> None:
    alice, mallory, conversation_id = _user(), new_id("mallory"), new_id()
    turn = await graphrag.begin_turn(alice, "Finance", conversation_id, "Alice's question")
    reply = await graphrag.complete_turn(turn, "Alice's answer")
    path = f"/ui/Finance/conversation/{conversation_id}"

    assert (await ui.get(path, headers=_auth(mallory))).status_code == 404
    assert (await ui.get("/ui/Finance/user", headers=_auth(mallory))).json() == []
    # The same user on another graph has another history.
    assert (
        await ui.get(f"/ui/Retail/conversation/{conversation_id}", headers=_auth(alice))
    ).status_code == 404
    assert (await ui.get("/ui/Retail/user", headers=_auth(alice))).json() == []
    stolen = await ui.post(
        "/ui/Finance/feedback",
        json={"message_id": reply["message_id"], "feedback": 1},
        headers=_auth(mallory),
    )
    assert stolen.status_code == 404
    deleted = await ui.delete(path, headers=_auth(mallory))
    assert deleted.status_code == 404
    messages = await graphrag.conversation_messages(alice, "Finance", conversation_id)
    assert [m["feedback"] for m in messages] == [0, 0]

    gone = await ui.delete(path, headers=_auth(alice))
    assert gone.json() == {"message": "Conversation deleted successfully", "deleted_messages": 2}
    with pytest.raises(NotFoundError):
        await graphrag.conversation_messages(alice, "Finance", conversation_id)


async def test_bad_requests_get_clear_statuses(ui: httpx.AsyncClient) -> None:
    user = _user()
    assert (await ui.get("/ui/Finance/user")).status_code == 401
    assert (await ui.get("/ui/Finance/user", headers=_auth(user, "wrong"))).status_code == 401
    bad_graph = await ui.get("/ui/1Finance/user", headers=_auth(user))
    assert bad_graph.status_code == 422
    assert "graphname" in bad_graph.text
    bad_feedback = await ui.post(
        "/ui/Finance/feedback", json={"message_id": "m-1", "feedback": 3}, headers=_auth(user)
    )
    assert bad_feedback.status_code == 422
    assert "feedback" in bad_feedback.text
    unknown = await ui.post(
        "/ui/Finance/feedback", json={"message_id": "m-unknown", "feedback": 1}, headers=_auth(user)
    )
    assert unknown.status_code == 404
    # An id the service refuses (a newline) comes back as 400 naming the field.
    refused = await ui.get("/ui/Finance/conversation/a%0Ab", headers=_auth(user))
    assert refused.status_code == 400
    assert "conversation_id" in refused.json()["detail"]


async def test_unreachable_memory_service_is_503() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = AsyncMemoryClient(f"127.0.0.1:{port}", timeout_s=1.0, retries=1)
    try:
        transport = httpx.ASGITransport(app=_app(GraphRAGMemory(client)))
        async with httpx.AsyncClient(transport=transport, base_url="http://graphrag") as http:
            down = await http.get("/ui/Finance/user", headers=_auth(_user()))
        assert down.status_code == 503
    finally:
        await client.close()


def graphrag_app(
    memory: GraphRAGMemory, graphs: list[str], is_admin: Callable[..., Any] | None = None
) -> FastAPI:
    """GraphRAG's app as it is: `ui_basic_auth` returns (graphs, credentials)
    (tigergraph/graphrag cc4eed1, graphrag/app/routers/ui.py:98-106); `is_admin` as
    memory_ui_router takes it."""

    def ui_basic_auth(
        creds: Annotated[HTTPBasicCredentials, Depends(_basic)],
    ) -> tuple[list[str], HTTPBasicCredentials]:
        if not secrets.compare_digest(creds.password, "pw"):
            raise HTTPException(status_code=401, detail="bad credentials")
        return graphs, creds

    app = FastAPI()
    app.include_router(memory_ui_router(memory, ui_basic_auth, is_admin=is_admin))
    return app


async def test_graphrags_auth_shape_and_graph_access(graphrag: GraphRAGMemory) -> None:
    user, conversation_id = _user(), new_id()
    turn = await graphrag.begin_turn(user, "Finance", conversation_id, "Who owns A-1?")
    reply = await graphrag.complete_turn(turn, "Bob.")
    transport = httpx.ASGITransport(app=graphrag_app(graphrag, ["Finance"]))
    async with httpx.AsyncClient(transport=transport, base_url="http://graphrag") as ui:
        listed = await ui.get("/ui/Finance/user", headers=_auth(user))
        assert [c["conversation_id"] for c in listed.json()] == [conversation_id]
        # A graph the user lacks is 403 on every route, whatever is stored there.
        await graphrag.begin_turn(user, "Retail", new_id(), "Not yours to read")
        for method, path in [
            ("GET", "/ui/Retail/user"),
            ("GET", f"/ui/Retail/conversation/{conversation_id}"),
            ("DELETE", f"/ui/Retail/conversation/{conversation_id}"),
            ("GET", "/ui/Retail/get_feedback"),
        ]:
            assert (await ui.request(method, path, headers=_auth(user))).status_code == 403
        denied = await ui.post(
            "/ui/Retail/feedback", json={"message_id": "m", "feedback": 1}, headers=_auth(user)
        )
        assert denied.status_code == 403
        # GraphRAG's Message allows feedback: null (common/py_schemas/schemas.py:186).
        body = {
            "conversation_id": conversation_id,
            "message_id": reply["message_id"],
            "parent_id": turn.message_id,
            "model": None,
            "content": "Bob.",
            "answered_question": True,
            "response_type": "inquiryai",
            "query_sources": None,
            "role": "system",
            "response_time": None,
            "feedback": None,
            "comment": "no rating yet",
        }
        saved = await ui.post("/ui/Finance/feedback", json=body, headers=_auth(user))
        assert saved.status_code == 200, saved.text
        # The feedback export: the caller's messages on the graph, feedback fields included.
        await ui.post(
            "/ui/Finance/feedback",
            json={**body, "feedback": 2, "comment": "wrong"},
            headers=_auth(user),
        )
        exported = (await ui.get("/ui/Finance/get_feedback", headers=_auth(user))).json()
        assert [(m["role"], m["feedback"], m["comment"]) for m in exported] == [
            ("user", 0, ""),
            ("system", 2, "wrong"),
        ]
        assert (await ui.get("/ui/Finance/get_feedback", headers=_auth(new_id()))).json() == []
