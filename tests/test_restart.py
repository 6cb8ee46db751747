"""Restart after a crash: time to serving after `kill -9` of the server, with its embedded
PostgreSQL left running and killed too; a start that waits for a long crash recovery and says
so; SIGTERM during that wait stays within its bound.

A long recovery is made for real: the data directory is put into archive recovery with a
restore_command that sleeps, so PostgreSQL stays 'starting' longer than pg_ctl's 10 s wait.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from memory_client.v1 import memory_pb2 as pb
from memory_client.v1 import memory_pb2_grpc as pb_grpc

from conftest import all_messages, assert_eventually, new_id
from server_process import ServerProcess

pytestmark = pytest.mark.slow

SCOPE = {"username": "restart-test", "graphname": "Finance"}


@pytest.fixture
def data_dir(process_data_dir: Path) -> Path:
    return process_data_dir


def _server(data_dir: Path) -> ServerProcess:
    return ServerProcess("--data-dir", str(data_dir), "--listen-address", "127.0.0.1:0")


def _postmaster_pid(pgdata: Path) -> int:
    return int((pgdata / "postmaster.pid").read_text().splitlines()[0])


def _postgres_processes(pgdata: Path) -> list[int]:
    found = subprocess.run(
        ["pgrep", "-f", f"postgres.*{pgdata}|^postgres:"], capture_output=True, text=True
    )
    mine = []
    for pid in map(int, found.stdout.split()):
        try:
            if Path(f"/proc/{pid}/cwd").resolve() == pgdata.resolve():
                mine.append(pid)
        except OSError:
            continue
    return mine


async def _kill_postgres(pgdata: Path) -> None:
    os.kill(_postmaster_pid(pgdata), signal.SIGKILL)

    async def gone() -> bool:
        return not _postgres_processes(pgdata)

    await assert_eventually(gone, timeout_s=20, what="every postgres process exited")


async def _write(server: ServerProcess, conversation: str, count: int) -> list[str]:
    async with server.channel() as channel:
        stub = pb_grpc.MemoryServiceStub(channel)
        ids = []
        for i in range(count):
            started = await stub.StartTurn(
                pb.StartTurnRequest(**SCOPE, conversation_id=conversation, content=f"q {i}")
            )
            ids.append(started.message.message_id)
        return ids


async def _stored(server: ServerProcess, conversation: str) -> list[str]:
    async with server.channel() as channel:
        stub = pb_grpc.MemoryServiceStub(channel)
        return [m.message_id for m in await all_messages(stub, SCOPE, conversation)]


async def _timed_start(data_dir: Path) -> tuple[ServerProcess, float]:
    began = time.monotonic()
    server = await _server(data_dir).start(timeout_s=120)
    return server, time.monotonic() - began


async def test_time_to_serving_after_kill_9(data_dir: Path) -> None:
    pgdata = data_dir / "pgdata"
    conversation = new_id()
    first, cold_s = await _timed_start(data_dir)
    acknowledged = await _write(first, conversation, 20)
    first.kill(signal.SIGKILL)
    await first.wait()

    # The database was left running: the next server adopts it.
    second, adopted_s = await _timed_start(data_dir)
    assert await _stored(second, conversation) == acknowledged
    acknowledged += await _write(second, conversation, 20)
    second.kill(signal.SIGKILL)
    await second.wait()
    await _kill_postgres(pgdata)

    # Both killed: PostgreSQL replays its WAL first.
    third, recovered_s = await _timed_start(data_dir)
    assert await _stored(third, conversation) == acknowledged
    assert await third.stop() == 0
    print(
        "restart:",
        json.dumps(
            {
                "first_start_s": round(cold_s, 2),
                "after_kill_9_database_running_s": round(adopted_s, 2),
                "after_kill_9_database_killed_too_s": round(recovered_s, 2),
            }
        ),
    )
    assert "recovering after a crash" not in "".join(third.log)
    # A clean stop and start says nothing of recovery ("ready after 0.1s of recovery" was
    # logged on every start).
    fourth, _ = await _timed_start(data_dir)
    assert await fourth.stop() == 0
    assert "recovery" not in "".join(fourth.log), "".join(fourth.log)
    # Nor does its shutdown print gRPC's raw fork-handler line.
    assert "fork_posix" not in "".join(fourth.log), "".join(fourth.log)


def _make_recovery_slow(pgdata: Path, sleep_s: int) -> None:
    """Archive recovery at the next start, whose restore_command sleeps and finds nothing:
    PostgreSQL stays 'starting' (no hot standby: no connections meanwhile) for several such
    calls, then recovers from pg_wal."""
    (pgdata / "recovery.signal").write_text("")
    with (pgdata / "postgresql.auto.conf").open("a") as conf:
        conf.write(f"restore_command = 'sleep {sleep_s}; exit 1'\nhot_standby = off\n")
    if os.geteuid() == 0:
        owner = pgdata.stat()
        os.chown(pgdata / "recovery.signal", owner.st_uid, owner.st_gid)


async def _crashed_directory(data_dir: Path, conversation: str) -> list[str]:
    server = await _server(data_dir).start()
    acknowledged = await _write(server, conversation, 5)
    server.kill(signal.SIGKILL)
    await server.wait()
    await _kill_postgres(data_dir / "pgdata")
    _make_recovery_slow(data_dir / "pgdata", sleep_s=4)
    return acknowledged


@pytest.mark.timeout(240)
async def test_a_start_waits_for_a_long_recovery_and_reports_it(data_dir: Path) -> None:
    conversation = new_id()
    acknowledged = await _crashed_directory(data_dir, conversation)
    server, waited_s = await _timed_start(data_dir)
    log = "".join(server.log)
    print("slow recovery:", json.dumps({"time_to_serving_s": round(waited_s, 2)}))
    assert waited_s > 10, "the recovery was not slower than pg_ctl's wait; the test proves nothing"
    assert "embedded PostgreSQL is recovering after a crash" in log, log
    assert await _stored(server, conversation) == acknowledged
    assert await server.stop() == 0


@pytest.mark.timeout(240)
async def test_sigterm_while_the_database_recovers_stops_within_its_bound(data_dir: Path) -> None:
    await _crashed_directory(data_dir, new_id())
    server = _server(data_dir)
    starting = asyncio.ensure_future(server.start(timeout_s=120))
    await asyncio.sleep(3)  # inside pg_ctl's wait, or ours
    assert not starting.done()
    began = time.monotonic()
    server.kill(signal.SIGTERM)
    with pytest.raises(AssertionError, match="server did not start"):
        await starting
    code = await server.wait(timeout_s=30)
    stopped_s = time.monotonic() - began
    print("sigterm while recovering:", json.dumps({"exit_s": round(stopped_s, 2), "code": code}))
    # Two grace periods (10 s each by default) bound every SIGTERM.
    assert code == 0 and stopped_s < 20, "".join(server.log)
