"""The admin feedback export: the ListFeedback RPC, the adapter's `feedback_export`, GraphRAG's
admin rule (`memory_client.graphrag.roles`) and the router's two get_feedback routes, against a
real server with GraphRAG's own auth shape."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from typing import Annotated, Any

import grpc
import httpx
import pytest
from fastapi import Depends, FastAPI
from fastapi.security import HTTPBasic, HTTPBasicCredentials
from test_graphrag import graphrag_app

from memory_client import AsyncMemoryClient, InvalidArgumentError
from memory_client.graphrag import (
    GraphRAGMemory,
    conversation_access_roles,
    global_roles,
    has_admin_role,
)
from memory_client.v1 import memory_pb2 as pb

from conftest import RunningServer, new_id

_basic = HTTPBasic()

# `SHOW USER` as TigerGraph prints it (the sample in tigergraph/graphrag cc4eed1,
# chat-history/routes/routes_test.go:451-467), with the users of these tests.
_SHOW_USER = """
  - Name: {admin}
    - Global Roles: globalobserver, globaldesigner
    - Graph 'Finance' Roles: queryreader
    - Secret: ad9****v7p
      - Alias: AUTO_GENERATED_ALIAS_suv6mm5
      - GraphName: Finance
    - LastSuccessLogin: Mon Jul 22 06:57:29 UTC 2024

  - Name: {user}
    - Global Roles: globalobserver
    - FailedAttempts: 0
"""

# GraphRAG's server_config.json chat section (configs/server_config.json:36-45 at cc4eed1).
_SERVER_CONFIG: dict[str, Any] = {
    "db_config": {"hostname": "http://tigergraph"},
    "chat_config": {"apiPort": "8002", "conversationAccessRoles": ["superuser", "globaldesigner"]},
}


def _auth(username: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{username}:pw".encode()).decode()}


def _app(memory: GraphRAGMemory, graphs: list[str], show_user: str) -> FastAPI:
    """GraphRAG's app (test_graphrag.graphrag_app) with the admin check: the caller's global
    roles from `SHOW USER` (here the text TigerGraph would print) against
    conversationAccessRoles."""

    def is_admin(creds: Annotated[HTTPBasicCredentials, Depends(_basic)]) -> bool:
        roles = global_roles(show_user, creds.username)
        return has_admin_role(roles, conversation_access_roles(_SERVER_CONFIG))

    return graphrag_app(memory, graphs, is_admin=is_admin)


@pytest.fixture
async def graphrag(memory: RunningServer) -> AsyncIterator[GraphRAGMemory]:
    async with GraphRAGMemory.connect(memory.address) as adapter:
        yield adapter


def _graph() -> str:
    # A graph of this test alone: the export reads every user's messages on it.
    return "G_" + new_id().replace("-", "_")


async def _exchange(memory: GraphRAGMemory, user: str, graph: str, question: str) -> str:
    turn = await memory.begin_turn(user, graph, new_id(), question)
    reply = await memory.complete_turn(turn, f"Answer to {question}")
    return str(reply["message_id"])


def test_global_roles_reads_one_users_section_by_exact_name() -> None:
    text = _SHOW_USER.format(admin="samuel", user="sam")
    assert global_roles(text, "samuel") == ["globalobserver", "globaldesigner"]
    # chat-history matched names by substring, so `sam` read `samuel`'s roles too.
    assert global_roles(text, "sam") == ["globalobserver"]
    assert global_roles(text, "nobody") == []
    assert conversation_access_roles({"db_config": {}}) == []
    assert conversation_access_roles(_SERVER_CONFIG) == ["superuser", "globaldesigner"]
    assert has_admin_role(["globaldesigner"], ["superuser", "globaldesigner"])
    assert not has_admin_role(["globalobserver"], ["superuser", "globaldesigner"])


async def test_list_feedback_pages_every_users_messages_of_one_graph(
    memory: RunningServer, graphrag: GraphRAGMemory
) -> None:
    graph, other_graph = _graph(), _graph()
    alice, bob = new_id("alice"), new_id("bob")
    await _exchange(graphrag, alice, graph, "first")
    rated = await _exchange(graphrag, bob, graph, "second")
    await _exchange(graphrag, alice, other_graph, "elsewhere")
    await graphrag.submit_feedback(bob, graph, rated, 2, "wrong")

    async with AsyncMemoryClient(memory.address) as client:
        seen: list[pb.FeedbackEntry] = []
        token = ""
        while True:
            page = await client.list_feedback(graph, page_size=1, page_token=token)
            assert len(page.entries) <= 1
            seen.extend(page.entries)
            token = page.next_page_token
            if not token:
                break
        assert [(e.username, e.message.content) for e in seen] == [
            (alice, "first"),
            (alice, "Answer to first"),
            (bob, "second"),
            (bob, "Answer to second"),
        ]
        assert [e.HasField("feedback_at") for e in seen] == [False, False, False, True]

        only_rated = await client.list_feedback(graph, rated_only=True)
        assert [
            (e.username, e.message.feedback, e.message.comment) for e in only_rated.entries
        ] == [(bob, pb.FEEDBACK_DOWN, "wrong")]
        with pytest.raises(InvalidArgumentError, match="graphname"):
            await client.list_feedback("")
        with pytest.raises(InvalidArgumentError, match="page_token"):
            await client.list_feedback(graph, page_token="not-a-token")
        with pytest.raises(InvalidArgumentError, match="page_size"):
            await client.list_feedback(graph, page_size=-1)
    # ghz and grpcurl callers reach it by its full name too.
    async with grpc.aio.insecure_channel(memory.address) as channel:
        call = channel.unary_unary(
            "/graphrag.memory.v1.MemoryService/ListFeedback",
            request_serializer=pb.ListFeedbackRequest.SerializeToString,
            response_deserializer=pb.ListFeedbackResponse.FromString,
        )
        response = await call(pb.ListFeedbackRequest(graphname=other_graph))
        assert [e.username for e in response.entries] == [alice, alice]


async def test_admin_gets_every_users_feedback_and_others_their_own(
    graphrag: GraphRAGMemory,
) -> None:
    graph, other_graph = _graph(), _graph()
    admin, alice, bob = new_id("admin"), new_id("alice"), new_id("bob")
    await _exchange(graphrag, alice, graph, "alice asks")
    bobs = await _exchange(graphrag, bob, graph, "bob asks")
    await _exchange(graphrag, bob, other_graph, "bob elsewhere")
    await graphrag.submit_feedback(bob, graph, bobs, 1, "good")

    def client_for(user: str, graphs: list[str]) -> httpx.AsyncClient:
        show_user = _SHOW_USER.format(admin=admin, user=user)
        app = _app(graphrag, graphs, show_user)
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://g")

    async with client_for(bob, [graph, other_graph]) as ui:
        answer = await ui.get(f"/ui/{graph}/get_feedback", headers=_auth(bob))
        assert answer.status_code == 200, answer.text
        own = answer.json()
        assert [m["content"] for m in own] == ["bob asks", "Answer to bob asks"]
        everywhere = (await ui.get("/ui/get_feedback", headers=_auth(bob))).json()
        assert sorted(m["content"] for m in everywhere) == sorted(
            ["bob asks", "Answer to bob asks", "bob elsewhere", "Answer to bob elsewhere"]
        )
        # A non-admin never sees another user's messages.
        assert all("alice" not in m["content"] for m in everywhere)

    async with client_for(alice, [graph]) as ui:
        exported = (await ui.get(f"/ui/{graph}/get_feedback", headers=_auth(admin))).json()
        assert [(m["user_id"], m["content"], m["feedback"]) for m in exported] == [
            (alice, "alice asks", 0),
            (alice, "Answer to alice asks", 0),
            (bob, "bob asks", 0),
            (bob, "Answer to bob asks", 1),
        ]
        assert {m["graphname"] for m in exported} == {graph}
        assert exported[3]["comment"] == "good"
        assert exported[3]["update_ts"] >= exported[3]["create_ts"]
        # The graph-less route covers only the admin's own graphs.
        overall = (await ui.get("/ui/get_feedback", headers=_auth(admin))).json()
        assert overall == exported
        # A graph not in the admin's list is refused like any other.
        assert (
            await ui.get(f"/ui/{other_graph}/get_feedback", headers=_auth(admin))
        ).status_code == 403
        assert (await ui.get("/ui/get_feedback")).status_code == 401
