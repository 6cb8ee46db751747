"""graphrag-memory-mcp (issue 32) from the official MCP SDK's own client, over stdio and over
streamable HTTP, against a real memory server: every tool, two callers kept apart, a graph a
caller may not use, bad arguments, a secret, the service down, and HTTP without credentials."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import ClientSession
from mcp_harness import (
    MODULE,
    call,
    http_mcp,
    http_session,
    refused,
    stdio_session,
    tokens_file,
)

from memory_client.v1 import memory_pb2 as pb

from conftest import RunningServer, outbox_caught_up

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

TOOLS = {
    "search_memory",
    "remember",
    "update_memory",
    "forget_memory",
    "memory_context",
    "list_memories",
    "memory_history",
}
ALICE_TOKEN = "alice-token-" + "a" * 24
BOB_TOKEN = "bob-token-" + "b" * 24


def _user() -> str:
    return f"mcp-{uuid.uuid4().hex[:10]}"


async def _said(memory: RunningServer, user: str, graph: str, text: str) -> None:
    """A user message in a conversation of `user`'s, through the gRPC service (an episode)."""
    await memory.stub.StartTurn(
        pb.StartTurnRequest(
            username=user, graphname=graph, conversation_id=f"c-{uuid.uuid4().hex[:8]}",
            content=text,
        )
    )  # fmt: skip


async def _every_tool(session: ClientSession, memory: RunningServer, user: str) -> None:
    """The whole tool set, as a host's model would use it, on the caller's default graph."""
    listed = await session.list_tools()
    assert {t.name for t in listed.tools} == TOOLS
    for tool in listed.tools:
        assert tool.description and tool.outputSchema is not None, tool.name
        assert tool.annotations is not None and tool.annotations.openWorldHint is False
        reads = tool.name in {"search_memory", "memory_context", "list_memories", "memory_history"}
        assert tool.annotations.readOnlyHint is reads, tool.name
        changes = tool.name in {"update_memory", "forget_memory"}
        assert reads or tool.annotations.destructiveHint is changes, tool.name
        properties = set(tool.inputSchema.get("properties", {}))
        assert not properties & {"user", "username", "user_id", "owner"}, tool.name

    added = await call(session, "remember", text="Prefers answers in French", kind="preference")
    fact = added["fact"]
    assert added["graph"] == "Finance" and fact["kind"] == "preference"
    assert fact["fact_id"] and fact["version_id"] and fact["valid_from"] and fact["recorded_at"]
    await _said(memory, user, "Finance", "We adopted a greyhound called Biscuit last spring")
    await outbox_caught_up(memory)

    found = await call(session, "search_memory", query="which language do I prefer", top_k=5)
    best = found["facts"][0]
    assert best["fact_id"] == fact["fact_id"] and 0 < best["score"] <= 1
    assert {"vector_score", "lexical_score", "valid_from", "recorded_at", "provenance"} <= set(best)
    said = await call(session, "search_memory", query="greyhound Biscuit", top_k=5)
    assert "greyhound" in said["episodes"][0]["text"] and said["episodes"][0]["said_at"]
    assert said["episodes"][0]["role"] == "user"
    no_episodes = await call(session, "search_memory", query="greyhound", include_episodes=False)
    assert no_episodes["episodes"] == []

    context = await call(session, "memory_context", question="What language should I use?")
    assert "Prefers answers in French" in context["context"]
    assert context["facts"][0]["fact_id"] == fact["fact_id"]
    assert 0 < context["tokens"] <= context["budget_tokens"]

    page = await call(session, "list_memories", page_size=10)
    assert [f["fact_id"] for f in page["facts"]] == [fact["fact_id"]]
    before_update = datetime.now(UTC)
    await asyncio.sleep(0.05)

    updated = await call(
        session, "update_memory", fact_id=fact["fact_id"], text="Prefers answers in Portuguese"
    )
    assert updated["fact"]["fact_id"] == fact["fact_id"]
    assert updated["fact"]["version_id"] != fact["version_id"]
    history = await call(session, "memory_history", fact_id=fact["fact_id"])
    # Bitemporal: the first version superseded, its copy closed in valid time, the new one.
    versions = history["versions"]
    assert [v["text"] for v in versions] == [
        "Prefers answers in French",
        "Prefers answers in French",
        "Prefers answers in Portuguese",
    ]
    assert versions[0]["superseded_at"] is not None and versions[1]["valid_to"] is not None
    assert [e["event"] for e in history["events"]] == ["ADD", "UPDATE"]
    assert history["current"]["text"] == "Prefers answers in Portuguese"

    # What memory knew before the update (transaction time), and now.
    then = await call(session, "list_memories", known_at=before_update.isoformat())
    assert [f["text"] for f in then["facts"]] == ["Prefers answers in French"]
    then_found = await call(
        session, "search_memory", query="answers in", known_at=before_update.isoformat()
    )
    assert then_found["facts"][0]["text"] == "Prefers answers in French"

    gone = await call(session, "forget_memory", fact_id=fact["fact_id"], reason="never_true")
    assert gone["forgotten"] and [e["event"] for e in gone["events"]] == ["ADD", "UPDATE", "DELETE"]
    assert (await call(session, "list_memories"))["facts"] == []
    kept = await call(session, "memory_history", fact_id=fact["fact_id"])
    assert kept["current"] is None and len(kept["versions"]) >= 3


async def test_every_tool_over_stdio(memory: RunningServer, tmp_path: Path) -> None:
    user = _user()
    async with stdio_session(memory.address, user, ["Finance", "HR"]) as session:
        await _every_tool(session, memory, user)


async def test_every_tool_over_http(memory: RunningServer, tmp_path: Path) -> None:
    user = _user()
    tokens = tokens_file(tmp_path / "tokens.json", {ALICE_TOKEN: (user, ["Finance", "HR"])})
    with http_mcp("--target", memory.address, "--tokens-file", str(tokens)) as server:
        headers = {"Authorization": f"Bearer {ALICE_TOKEN}"}
        async with http_session(server.url, headers) as session:
            await _every_tool(session, memory, user)
    assert ALICE_TOKEN not in "".join(server.log)


async def test_two_callers_never_see_each_other(memory: RunningServer, tmp_path: Path) -> None:
    alice, bob = _user(), _user()
    tokens = tokens_file(
        tmp_path / "tokens.json",
        {ALICE_TOKEN: (alice, ["Finance"]), BOB_TOKEN: (bob, ["Finance"])},
    )
    with http_mcp("--target", memory.address, "--tokens-file", str(tokens)) as server:
        async with (
            http_session(server.url, {"Authorization": f"Bearer {ALICE_TOKEN}"}) as as_alice,
            http_session(server.url, {"Authorization": f"Bearer {BOB_TOKEN}"}) as as_bob,
        ):
            mine = await call(as_alice, "remember", text="Salary review is due in March")
            fact_id = mine["fact"]["fact_id"]
            await call(as_bob, "remember", text="Owns a sailing boat on the Tagus")
            await outbox_caught_up(memory)
            seen = await call(as_bob, "search_memory", query="salary review March")
            assert all("Salary" not in f["text"] for f in seen["facts"])
            listed = await call(as_bob, "list_memories")
            assert [f["text"] for f in listed["facts"]] == ["Owns a sailing boat on the Tagus"]
            for tool in ("memory_history", "forget_memory"):
                assert (await refused(as_bob, tool, fact_id=fact_id)).startswith("NOT_FOUND")
            assert "NOT_FOUND" in await refused(as_bob, "update_memory", fact_id=fact_id, text="x")
            still = await call(as_alice, "list_memories")
            assert [f["fact_id"] for f in still["facts"]] == [fact_id]
    # The service agrees: each user's scope holds only their own fact.
    for user, text in ((alice, "Salary"), (bob, "sailing")):
        page = await memory.stub.ListFacts(pb.ListFactsRequest(username=user, graphname="Finance"))
        assert [text in f.text for f in page.facts] == [True]


async def test_a_graph_the_caller_may_not_use_is_refused(memory: RunningServer) -> None:
    user = _user()
    async with stdio_session(memory.address, user, ["Finance"]) as session:
        for tool, arguments in (
            ("remember", {"text": "Leads the audit team"}),
            ("search_memory", {"query": "audit"}),
            ("list_memories", {}),
        ):
            why = await refused(session, tool, graph="HR", **arguments)
            assert why.startswith("PERMISSION_DENIED: graph 'HR' is not one this caller may use")
    page = await memory.stub.ListFacts(pb.ListFactsRequest(username=user, graphname="HR"))
    assert list(page.facts) == []


async def test_bad_arguments_and_secrets_are_tool_errors(memory: RunningServer) -> None:
    user = _user()
    async with stdio_session(memory.address, user, ["Finance"]) as session:
        assert (await refused(session, "remember", text="")).startswith("INVALID_ARGUMENT: text")
        naive = datetime(2026, 1, 1).isoformat()
        assert "timezone" in await refused(session, "list_memories", as_of=naive)
        assert "top_k" in await refused(session, "search_memory", query="x", top_k=0)
        assert "reason" in await refused(session, "forget_memory", fact_id="f", reason="maybe")
        missing = await refused(session, "memory_history", fact_id=str(uuid.uuid4()))
        assert missing.startswith("NOT_FOUND")
        secret = "My AWS key is AKIAIOSFODNN7EXAMPLE"
        why = await refused(session, "remember", text=secret)
        assert why.startswith("INVALID_ARGUMENT: text: holds a secret")
        assert "AKIAIOSFODNN7EXAMPLE" not in why
        assert (await call(session, "list_memories"))["facts"] == []
        later = (datetime.now(UTC) + timedelta(days=1)).isoformat()
        assert (await call(session, "list_memories", as_of=later))["facts"] == []


async def test_service_down_is_a_clear_error_not_a_hang(tmp_path: Path) -> None:
    with anyio.fail_after(60):
        async with stdio_session("127.0.0.1:9", _user(), ["Finance"], "--timeout", "2") as session:
            began = asyncio.get_running_loop().time()
            why = await refused(session, "search_memory", query="anything")
            took = asyncio.get_running_loop().time() - began
    assert why.startswith("UNAVAILABLE: the memory service cannot be reached"), why
    assert why.endswith("try again") and took < 10


async def test_http_refuses_requests_without_a_caller(
    memory: RunningServer, tmp_path: Path
) -> None:
    tokens = tokens_file(tmp_path / "tokens.json", {ALICE_TOKEN: (_user(), ["Finance"])})
    initialize: dict[str, Any] = {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "t", "version": "0"}},
    }  # fmt: skip
    accept = {"Accept": "application/json, text/event-stream"}
    with http_mcp("--target", memory.address, "--tokens-file", str(tokens)) as server:
        async with httpx.AsyncClient(timeout=30) as http:
            for headers in ({}, {"Authorization": "Bearer not-a-token-of-anyone"}):
                answer = await http.post(server.url, json=initialize, headers={**accept, **headers})
                assert answer.status_code == 401
                assert answer.headers["www-authenticate"].startswith("Bearer")
            ok = await http.post(
                server.url, json=initialize,
                headers={**accept, "Authorization": f"Bearer {ALICE_TOKEN}"},
            )  # fmt: skip
            assert ok.status_code == 200, ok.text
            health = await http.get(server.base + "/healthz")
            assert health.status_code == 200 and health.json() == {"status": "SERVING"}


async def test_a_trusted_proxys_headers_name_the_caller(memory: RunningServer) -> None:
    user = _user()
    args = ("--target", memory.address, "--user-header", "X-Forwarded-User")
    with http_mcp(*args, "--graphs-header", "X-Forwarded-Graphs") as server:
        headers = {"X-Forwarded-User": user, "X-Forwarded-Graphs": "Finance,HR"}
        async with http_session(server.url, headers) as session:
            added = await call(session, "remember", text="Works from Porto", graph="HR")
            assert added["graph"] == "HR"
            why = await refused(session, "list_memories", graph="Legal")
            assert why.startswith("PERMISSION_DENIED")
        async with httpx.AsyncClient(timeout=30) as http:
            answer = await http.post(server.url, json={}, headers={"X-Forwarded-Graphs": "HR"})
            assert answer.status_code == 401
    page = await memory.stub.ListFacts(pb.ListFactsRequest(username=user, graphname="HR"))
    assert [f.text for f in page.facts] == ["Works from Porto"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ((), "stdio serves one user"),
        (("--user", "alice"), "needs at least one graph"),
        (("--transport", "http"), "exactly one of --tokens-file and --user-header"),
        (("--transport", "http", "--user-header", "X-User"), "needs --graph or --graphs-header"),
        (("--transport", "http", "--tokens-file", "/nonexistent.json"), "tokens file"),
        (("--transport", "http", "--tokens-file", "{bad}", "--listen", "nowhere"), "tokens"),
    ],
)
def test_configuration_errors_are_one_line(
    args: tuple[str, ...], says: str, tmp_path: Path
) -> None:
    argv = [a.replace("{bad}", str(tmp_path / "bad.json")) for a in args]
    (tmp_path / "bad.json").write_text(
        '{"callers": [{"token": "short", "user": "u", "graphs": ["g"]}]}'
    )
    done = subprocess.run(
        [sys.executable, *MODULE, *argv], capture_output=True, text=True, timeout=60,
        env={"PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("graphrag-memory-mcp: configuration error: ") and says in line, line
    assert "short" not in line


def test_the_http_listener_lets_asyncio_turn_nagle_off() -> None:
    """asyncio sets TCP_NODELAY only on connections of a socket whose proto is TCP; a socket
    made with proto 0 (socket.create_server) left Nagle on, and every answer after the first
    on a kept-alive connection waited 40 ms for a delayed ACK (bench/mcp_overhead.py)."""
    import socket

    from memory_client.mcp_server.cli import _listening_socket

    with _listening_socket("127.0.0.1", 0) as listening:
        assert listening.proto == socket.IPPROTO_TCP


async def test_stdio_configured_by_the_environment_alone(memory: RunningServer) -> None:
    """What an MCP host's `env` block sets: no flags at all."""
    from mcp import StdioServerParameters
    from mcp.client.stdio import stdio_client

    user = _user()
    env = {
        "GRAPHRAG_MEMORY_MCP_TARGET": memory.address,
        "GRAPHRAG_MEMORY_MCP_USER": user,
        "GRAPHRAG_MEMORY_MCP_GRAPHS": "HR, Finance",
        "GRAPHRAG_MEMORY_MCP_TIMEOUT": "5",
    }
    params = StdioServerParameters(command=sys.executable, args=list(MODULE), env=env)
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        added = await call(session, "remember", text="Reviews payroll every Friday")
        assert added["graph"] == "HR"  # the first of the caller's graphs
    page = await memory.stub.ListFacts(pb.ListFactsRequest(username=user, graphname="HR"))
    assert [f.text for f in page.facts] == ["Reviews payroll every Friday"]


def test_a_bad_transport_from_the_environment_is_one_line() -> None:
    done = subprocess.run(
        [sys.executable, *MODULE], capture_output=True, text=True, timeout=60,
        env={"PATH": "/usr/bin:/bin", "GRAPHRAG_MEMORY_MCP_TRANSPORT": "ftp"},
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "graphrag-memory-mcp: configuration error: transport: expected stdio or http, got 'ftp'"
    ]
