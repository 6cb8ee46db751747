"""Who gets every user's feedback through the UI routes `memory.install` adds: chat-history's
rule (a global role of the caller, from `SHOW USER` run with the caller's own credentials, in
`chat_config.conversationAccessRoles`), over pyTigerGraph against the TigerGraph stand-in."""

from __future__ import annotations

import base64
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Annotated, Any

import httpx
import pytest
from fastapi import Depends, FastAPI
from fastapi.security import HTTPBasic, HTTPBasicCredentials

from memory_client.graphrag.integration import GraphRAGIntegration

from conftest import RunningServer, new_id
from tg_server import TGServer, TGState, _Handler, serve_tigergraph

_basic = HTTPBasic()
GRAPH = "Finance"
ROLES = {"ada": "superuser", "bob": "observer", "eve": "globaldesigner, auditor"}


class _ShowUserHandler(_Handler):
    """The stand-in, also answering `SHOW USER` the way a user without READ_USER sees it: their
    own entry (the layout chat-history's parseUserRoles test reads)."""

    def _gsql(self, text: str) -> str:
        if text.strip().upper() != "SHOW USER":
            return super()._gsql(text)
        user = self._basic_user() or ""
        return (
            f"  - Name: {user}\n"
            f"    - Global Roles: {ROLES.get(user, '')}\n"
            f"    - Graph '{GRAPH}' Roles: queryreader\n"
        )


@pytest.fixture
def tigergraph() -> Iterator[TGServer]:
    state = TGState(users={user: "pw" for user in ROLES} | {"sam": "pw"})
    with serve_tigergraph(state, _ShowUserHandler) as server:
        yield server


def _headers(user: str, password: str = "pw") -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


@pytest.fixture
async def ui(memory: RunningServer, tigergraph: TGServer) -> AsyncIterator[httpx.AsyncClient]:
    def ui_basic_auth(
        creds: Annotated[HTTPBasicCredentials, Depends(_basic)],
    ) -> tuple[list[str], HTTPBasicCredentials]:
        return [GRAPH], creds

    host, _, port = tigergraph.url.rpartition(":")
    server_config: dict[str, Any] = {
        "db_config": {"hostname": host, "restppPort": port, "gsPort": port},
        "graphrag_config": {"memory_service_address": memory.address},
        "chat_config": {"conversationAccessRoles": ["superuser", "globaldesigner"]},
    }
    app = FastAPI()
    integration = GraphRAGIntegration()
    integration.install(app, server_config, current_user=ui_basic_auth)
    async with app.router.lifespan_context(app):
        client = integration.graphrag_memory.client
        for user in ("ada", "bob"):
            await client.start_turn(
                user, GRAPH, new_id(), f"{user}'s question", message_id=str(uuid.uuid4())
            )
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://graphrag") as http:
            yield http


async def test_admins_are_who_chat_history_said(ui: httpx.AsyncClient) -> None:
    def authors(user: str, password: str = "pw") -> set[str]:
        return {m["content"].split("'")[0] for m in exported[(user, password)]}

    exported: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for user, password in [
        ("ada", "pw"),
        ("eve", "pw"),
        ("bob", "pw"),
        ("sam", "pw"),
        ("ada", "x"),
    ]:
        answer = await ui.get(f"/ui/{GRAPH}/get_feedback", headers=_headers(user, password))
        assert answer.status_code == 200, answer.text
        exported[(user, password)] = answer.json()
    # superuser and globaldesigner see everyone's messages (there may be other tests' users).
    assert {"ada", "bob"} <= authors("ada") and {"ada", "bob"} <= authors("eve")
    # Anyone else sees their own; a role named in another user's entry counts for nobody else.
    assert authors("bob") == {"bob"}
    assert authors("sam") == set()
    # TigerGraph refusing the credentials: not an admin (GraphRAG's auth refuses them first).
    assert authors("ada", "x") == {"ada"}
