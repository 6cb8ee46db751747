"""The bounded wait for a pool connection, on the real embedded PostgreSQL, and the status
every kind of database fault maps to."""

from __future__ import annotations

import asyncio
import time

import asyncpg
import grpc
import pytest

from memory_server.api.errors import to_status
from memory_server.store.database import BoundedWaitPool, DatabaseUnavailable, PoolExhausted


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
