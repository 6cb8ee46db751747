"""The server as a process: embedded PostgreSQL, kill -9, SIGTERM, configuration errors."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from memory_client.v1 import memory_pb2 as pb
from memory_client.v1 import memory_pb2_grpc as pb_grpc

from conftest import assert_eventually, new_id
from server_process import ServerProcess

pytestmark = pytest.mark.slow


def _server(data_dir: Path, *args: str) -> ServerProcess:
    """A server on its embedded PostgreSQL in `data_dir`, on a free port."""
    return ServerProcess("--data-dir", str(data_dir), "--listen-address", "127.0.0.1:0", *args)


def _postmaster_pid(data_dir: Path) -> int | None:
    pid_file = data_dir / "pgdata" / "postmaster.pid"
    try:
        return int(pid_file.read_text().splitlines()[0])
    except (FileNotFoundError, IndexError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
async def data_dir() -> AsyncIterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="graphrag-memory-proc-", dir="/tmp"))
    yield path
    pid = _postmaster_pid(path)
    if pid is not None and _alive(pid):  # a failed test must not leave PostgreSQL behind
        subprocess.run(["pkill", "-f", str(path)], check=False)
    shutil.rmtree(path, ignore_errors=True)


async def _turns(
    stub: pb_grpc.MemoryServiceStub,
    scope: dict[str, str],
    conversation: str,
    count: int,
    acknowledged: list[str],
) -> None:
    for i in range(count):
        started = await stub.StartTurn(
            pb.StartTurnRequest(**scope, conversation_id=conversation, content=f"question {i}")
        )
        acknowledged.append(started.message.message_id)
        done = await stub.CompleteTurn(
            pb.CompleteTurnRequest(
                **scope,
                conversation_id=conversation,
                content=f"answer {i}",
                parent_id=started.message.message_id,
            )
        )
        acknowledged.append(done.message.message_id)


async def test_kill_9_loses_nothing_acknowledged(data_dir: Path):
    scope = {"username": "kill-test", "graphname": "Finance"}
    conversation = new_id()
    first = await _server(data_dir).start()
    acknowledged: list[str] = []
    async with first.channel() as channel:
        stub = pb_grpc.MemoryServiceStub(channel)
        await _turns(stub, scope, conversation, 3, acknowledged)
        # Kill it while turns are in flight.
        load = asyncio.ensure_future(_turns(stub, scope, conversation, 10_000, acknowledged))
        await assert_eventually(
            lambda: asyncio.sleep(0, len(acknowledged) >= 20), what="turns under load"
        )
        first.kill(signal.SIGKILL)
        with pytest.raises(grpc.aio.AioRpcError):
            await load
    assert await first.wait() == -signal.SIGKILL
    postmaster = _postmaster_pid(data_dir)
    assert postmaster is not None and _alive(postmaster), "PostgreSQL outlives its owner"

    second = await _server(data_dir).start()  # no manual cleanup in between
    async with second.channel() as channel:
        stub = pb_grpc.MemoryServiceStub(channel)
        page = await stub.GetConversation(
            pb.GetConversationRequest(**scope, conversation_id=conversation, page_size=1000)
        )
        stored = [m.message_id for m in page.messages]
        assert set(acknowledged) <= set(stored)
        # At most the one in-flight write may have landed without its acknowledgement.
        assert len(stored) - len(acknowledged) <= 1
        assert stored[: len(acknowledged)] == acknowledged
        more: list[str] = []
        await _turns(stub, scope, conversation, 1, more)
    second.kill(signal.SIGTERM)
    assert await second.wait() == 0
    # The last owner stopped the embedded PostgreSQL, although the killed one never let go.
    await assert_eventually(
        lambda: asyncio.sleep(0, postmaster is None or not _alive(postmaster)),
        timeout_s=15,
        what="embedded PostgreSQL stopped",
    )


async def test_sigterm_drains_in_flight_writes(data_dir: Path):
    server = await _server(data_dir, "--shutdown-grace-seconds", "5").start()
    scope = {"username": "sigterm-test", "graphname": "Finance"}
    conversations = [new_id() for _ in range(8)]
    async with server.channel() as channel:
        stub = pb_grpc.MemoryServiceStub(channel)
        health = health_pb2_grpc.HealthStub(channel)
        status = await health.Check(health_pb2.HealthCheckRequest())
        assert status.status == health_pb2.HealthCheckResponse.SERVING
        await asyncio.gather(
            *(
                stub.StartTurn(pb.StartTurnRequest(**scope, conversation_id=c, content="warm up"))
                for c in conversations
            )
        )
        calls = [
            asyncio.ensure_future(
                stub.StartTurn(
                    pb.StartTurnRequest(
                        **scope, conversation_id=conversations[i % 8], content=f"burst {i}"
                    )
                )
            )
            for i in range(200)
        ]
        await asyncio.sleep(0.05)
        server.kill(signal.SIGTERM)
        results = await asyncio.gather(*calls, return_exceptions=True)
    started = time.monotonic()
    assert await server.wait() == 0
    assert time.monotonic() - started < 15
    acknowledged = [r.message.message_id for r in results if isinstance(r, pb.StartTurnResponse)]
    failures = [r for r in results if not isinstance(r, pb.StartTurnResponse)]
    for failure in failures:
        # Refused after SIGTERM, or still running when the grace period ran out (a loaded
        # machine): not acknowledged, and answered UNAVAILABLE, which clients retry (gRPC alone
        # answered CANCELLED to the calls that reached the stopping server before a handler).
        assert isinstance(failure, grpc.aio.AioRpcError)
        assert failure.code() == grpc.StatusCode.UNAVAILABLE, failure
        assert failure.details() == "the server is shutting down; retry"
    assert acknowledged, "requests in flight at SIGTERM finish"

    again = await _server(data_dir).start()
    async with again.channel() as channel:
        stub = pb_grpc.MemoryServiceStub(channel)
        stored: set[str] = set()
        for c in conversations:
            page = await stub.GetConversation(
                pb.GetConversationRequest(**scope, conversation_id=c, page_size=1000)
            )
            stored.update(m.message_id for m in page.messages)
    assert set(acknowledged) <= stored
    again.kill(signal.SIGTERM)
    assert await again.wait() == 0


async def _writer(
    stub: pb_grpc.MemoryServiceStub,
    scope: dict[str, str],
    conversation_id: str,
    acknowledged: list[str],
    refused: list[grpc.StatusCode],
) -> None:
    """Turn after turn until the server refuses; records what it acknowledged."""
    for i in range(10_000):
        try:
            started = await stub.StartTurn(
                pb.StartTurnRequest(
                    **scope,
                    conversation_id=conversation_id,
                    content=f"I prefer report {i} as a table.",
                    message_id=f"{conversation_id}-q{i}",
                ),
                timeout=20,
            )
            acknowledged.append(started.message.message_id)
            done = await stub.CompleteTurn(
                pb.CompleteTurnRequest(
                    **scope,
                    conversation_id=conversation_id,
                    content=f"Here is report {i}.",
                    parent_id=started.message.message_id,
                    message_id=f"{conversation_id}-a{i}",
                ),
                timeout=20,
            )
            acknowledged.append(done.message.message_id)
        except grpc.aio.AioRpcError as exc:
            refused.append(exc.code())
            return


async def test_sigterm_under_sustained_load_loses_no_acknowledged_write(data_dir: Path):
    server = await _server(
        data_dir, "--shutdown-grace-seconds", "5", "--log-format", "json"
    ).start()
    scope = {"username": "sigterm-load", "graphname": "Finance"}
    conversations = [new_id() for _ in range(16)]
    acknowledged: list[str] = []
    refused: list[grpc.StatusCode] = []
    async with server.channel() as channel:
        stub = pb_grpc.MemoryServiceStub(channel)
        writers = [
            asyncio.ensure_future(_writer(stub, scope, c, acknowledged, refused))
            for c in conversations
        ]
        await assert_eventually(
            lambda: asyncio.sleep(0, len(acknowledged) >= 200), what="load is running"
        )
        server.kill(signal.SIGTERM)
        signalled = time.monotonic()
        await asyncio.wait_for(asyncio.gather(*writers), timeout=30)  # nothing hangs
    assert await server.wait() == 0
    # Two grace periods at most (in-flight RPCs, then queued work), plus the database's stop.
    assert time.monotonic() - signalled < 2 * 5 + 5
    assert len(refused) == len(conversations), "every writer was refused in the end"
    assert set(refused) <= {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED}
    records = [json.loads(line) for line in server.log if line.startswith("{")]
    assert records and all({"time", "level", "logger", "message"} <= set(r) for r in records)
    assert not any("report" in r["message"] for r in records)  # no message text at INFO

    again = await _server(data_dir).start()
    async with again.channel() as channel:
        stub = pb_grpc.MemoryServiceStub(channel)
        stored: list[str] = []
        for c in conversations:
            page = await stub.GetConversation(
                pb.GetConversationRequest(**scope, conversation_id=c, page_size=1000)
            )
            stored.extend(m.message_id for m in page.messages)
    assert set(acknowledged) <= set(stored)
    assert len(stored) == len(set(stored))
    again.kill(signal.SIGTERM)
    assert await again.wait() == 0


def _run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memory_server", *args],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.parametrize(
    ("args", "env", "named"),
    [
        (["--stm-context-tokens", "lots"], {}, "stm_context_tokens"),
        (["--ltm-score-threshold", "1.5"], {}, "ltm_score_threshold"),
        ([], {"GRAPHRAG_MEMORY_ENABLED": "maybe"}, "GRAPHRAG_MEMORY_ENABLED"),
        ([], {"GRAPHRAG_MEMORY_DATABASE_URL": "mysql://x"}, "database_url"),
        (["--listen-address", "nowhere"], {}, "listen_address"),
    ],
)
def test_bad_configuration_is_a_clear_startup_error(
    args: list[str], env: dict[str, str], named: str
):
    result = _run_cli(*args, env=env)
    assert result.returncode == 2
    assert named in result.stderr
    assert "Traceback" not in result.stderr


def test_bad_config_file_names_the_key(tmp_path: Path):
    config = tmp_path / "server_config.json"
    config.write_text(json.dumps({"llm_config": {}, "memory_config": {"max_facts_per_scope": 0}}))
    result = _run_cli("--config", str(config))
    assert result.returncode == 2
    assert "max_facts_per_scope" in result.stderr and str(config) in result.stderr


async def test_healthcheck_command(data_dir: Path):
    assert _run_module("memory_server.healthcheck", "127.0.0.1:1").returncode == 1
    server = await _server(data_dir).start()
    try:
        result = await asyncio.to_thread(
            _run_module, "memory_server.healthcheck", f"127.0.0.1:{server.port}"
        )
        assert result.returncode == 0
    finally:
        server.kill(signal.SIGTERM)
        assert await server.wait() == 0


def _run_module(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=30
    )
