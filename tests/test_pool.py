"""The bounded wait for a pool connection, on the real embedded PostgreSQL, and the status
every kind of database fault maps to."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

import asyncpg
import grpc
import pytest

from memory_server.api.errors import to_status
from memory_server.store.database import BoundedWaitPool, DatabaseUnavailable, PoolExhausted

SERVER = Path(__file__).resolve().parents[1] / "server" / "memory_server"


async def test_a_pool_wait_past_its_bound_is_unavailable(database_url: str) -> None:
    pool = BoundedWaitPool(database_url, acquire_wait_s=0.3, min_size=1, max_size=1)
    await pool
    try:
        async with pool.acquire() as held:
            assert await held.fetchval("SELECT 1") == 1
            began = time.monotonic()
            with pytest.raises(PoolExhausted, match=r"within 0.3 s \(db_pool_max_size 1\)"):
                await pool.fetchval("SELECT 2")
            assert 0.25 < time.monotonic() - began < 2
            # The caller's own shorter deadline stays a deadline.
            with pytest.raises(TimeoutError):
                async with pool.acquire(timeout=0.05):
                    pass
            with pytest.raises(PoolExhausted):
                await pool.acquire()
        assert to_status(PoolExhausted("x"))[0] is grpc.StatusCode.UNAVAILABLE
        assert await pool.fetchval("SELECT 3") == 3  # free again
    finally:
        await pool.close()


async def test_a_terminated_connection_is_unavailable_and_the_pool_recovers(
    database_url: str,
) -> None:
    pool = BoundedWaitPool(database_url, acquire_wait_s=5, min_size=1, max_size=1)
    await pool
    admin = await asyncpg.connect(database_url)
    try:
        pid = await pool.fetchval("SELECT pg_backend_pid()")
        # Terminated in the middle of a statement (an idle one is replaced on acquire).
        sleeping = asyncio.ensure_future(pool.fetchval("SELECT pg_sleep(30)"))
        while not await admin.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND state = 'active'", pid
        ):
            await asyncio.sleep(0.02)
        assert await admin.fetchval("SELECT pg_terminate_backend($1)", pid)
        with pytest.raises(DatabaseUnavailable) as failure:
            await sleeping
        code, message = to_status(failure.value)
        assert code is grpc.StatusCode.UNAVAILABLE and message.endswith("retry")
        assert await pool.fetchval("SELECT 1") == 1
    finally:
        await admin.close()
        await pool.close()


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (asyncpg.ConnectionDoesNotExistError("gone"), grpc.StatusCode.UNAVAILABLE),
        (asyncpg.ConnectionFailureError("reset"), grpc.StatusCode.UNAVAILABLE),
        (asyncpg.CannotConnectNowError("recovery"), grpc.StatusCode.UNAVAILABLE),
        (asyncpg.AdminShutdownError("terminated"), grpc.StatusCode.UNAVAILABLE),
        (asyncpg.CrashShutdownError("crash"), grpc.StatusCode.UNAVAILABLE),
        (asyncpg.TooManyConnectionsError("full"), grpc.StatusCode.UNAVAILABLE),
        (asyncpg.DiskFullError("disk"), grpc.StatusCode.UNAVAILABLE),
        (asyncpg.InterfaceError("connection is closed"), grpc.StatusCode.UNAVAILABLE),
        (ConnectionResetError(), grpc.StatusCode.UNAVAILABLE),
        (asyncpg.QueryCanceledError("timeout"), grpc.StatusCode.DEADLINE_EXCEEDED),
        (TimeoutError(), grpc.StatusCode.DEADLINE_EXCEEDED),
        (asyncpg.SerializationError("conflict"), grpc.StatusCode.ABORTED),
        (asyncpg.UndefinedTableError("a bug of ours"), grpc.StatusCode.INTERNAL),
    ],
)
def test_database_errors_map_to_statuses(error: BaseException, code: grpc.StatusCode) -> None:
    assert to_status(error)[0] is code


async def test_a_release_sends_nothing_and_still_ends_an_open_transaction(
    database_url: str,
) -> None:
    """asyncpg's default reset is a round trip per release; the pool's is none. What asyncpg
    does on its own still happens: a transaction left open is rolled back."""
    pool = BoundedWaitPool(database_url, acquire_wait_s=5, min_size=1, max_size=1)
    await pool
    try:
        async with pool.acquire() as conn:
            pid = conn.get_server_pid()
            await conn.fetchval("SELECT 'released-quietly'")
        # The backend's last statement is still ours: no reset statement followed it.
        last = await asyncpg.connect(database_url)
        try:
            query = await last.fetchval("SELECT query FROM pg_stat_activity WHERE pid = $1", pid)
        finally:
            await last.close()
        assert query == "SELECT 'released-quietly'"

        async with pool.acquire() as conn:
            await conn.execute("BEGIN")  # not a managed transaction: left open on purpose
            await conn.execute("CREATE TABLE pool_release_probe (x int)")
        async with pool.acquire() as conn:
            assert conn.get_server_pid() == pid
            assert not conn.is_in_transaction()
            exists = await conn.fetchval("SELECT to_regclass('pool_release_probe') IS NOT NULL")
            assert exists is False
    finally:
        await pool.close()


# Statements that leave state on a session, which a pooled connection would carry to its next
# user now that a release resets nothing (store.database.keep_session).
SESSION_STATE = re.compile(
    r"pg_advisory_lock\(|pg_try_advisory_lock\(|\bLISTEN\b|WITH HOLD|CREATE TEMP|"
    # a SET that opens a statement (after a quote or ";"), not an UPDATE's SET list
    r"""[\"';]\s*SET (?!LOCAL\b)|set_config\([^)]*false"""
)  # SQL keywords in capitals, as the server writes them (prose says "listen", "set ... to")


# Modules whose statements run on a connection of their own, opened and closed by them, never
# on a pool's: the pgvector index command (CREATE INDEX CONCURRENTLY needs a session of its own).
OWN_CONNECTION = {Path("index/pgvector_kind.py")}


def test_the_server_sets_no_session_state() -> None:
    found = [
        f"{path.relative_to(SERVER)}:{n}: {line.strip()}"
        for path in sorted(SERVER.rglob("*.py"))
        if path.relative_to(SERVER) not in OWN_CONNECTION
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if SESSION_STATE.search(line) and "SESSION_STATE" not in line
    ]
    assert found == []
    assert SESSION_STATE.search("await conn.execute('SET hnsw.ef_search = 200')")
    assert SESSION_STATE.search("SELECT pg_advisory_lock($1)")
    assert not SESSION_STATE.search("SET LOCAL hnsw.ef_search = 200")
    assert SESSION_STATE.search('await conn.execute("SET work_mem = 1024")')
    assert SESSION_STATE.search("SELECT 1; SET statement_timeout TO 0")
    assert not SESSION_STATE.search("UPDATE facts SET kind = $2")
    assert not SESSION_STATE.search("           SET superseded_at = COALESCE(l.superseded_at")
