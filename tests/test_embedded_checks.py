"""The embedded PostgreSQL's start-up checks: the CPU baseline, and the pgvector distance query
that runs before the server serves.

A CPU without the baseline cannot be had here, so the crash it would cause is made for real:
the self-check's backend is held on a lock and sent SIGILL, which PostgreSQL reports exactly as
an illegal instruction in vector.so ("terminated by signal 4: Illegal instruction").
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import pytest

from memory_server.store.embedded import EmbeddedPostgres
from memory_server.store.embedded_checks import (
    X86_64_BASELINE_FLAGS,
    PlatformError,
    check_vector_distance,
    missing_cpu_features,
)

from conftest import assert_eventually
from server_process import ServerProcess

# /proc/cpuinfo flags of a Nehalem (x86-64-v2) and of a Haswell (x86-64-v3), trimmed.
NEHALEM = {"fpu", "sse", "sse2", "ssse3", "sse4_1", "sse4_2", "popcnt", "cx16", "lahf_lm", "xsave"}
HASWELL = NEHALEM | {"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe"}


def test_the_cpu_baseline_is_x86_64_v3() -> None:
    assert missing_cpu_features("x86_64", HASWELL) == []
    assert missing_cpu_features("x86_64", HASWELL | {"avx512f"}) == []
    assert missing_cpu_features("x86_64", NEHALEM) == [
        "avx",
        "avx2",
        "bmi1",
        "bmi2",
        "f16c",
        "fma",
        "abm",
        "movbe",
    ]
    # The aarch64 build needs SVE (a Neoverse N1 has asimd, not sve).
    neoverse_n1 = {"fp", "asimd", "aes", "pmull", "sha1", "sha2", "crc32", "atomics", "asimddp"}
    assert missing_cpu_features("aarch64", neoverse_n1) == ["sve"]
    assert missing_cpu_features("aarch64", neoverse_n1 | {"sve", "sve2"}) == []
    assert missing_cpu_features("riscv64", set()) == []


def test_this_machine_meets_the_baseline() -> None:
    # Otherwise every test of the embedded database here would fail less clearly.
    assert missing_cpu_features() == [], f"needs {X86_64_BASELINE_FLAGS}"


@pytest.fixture
def data_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(dir="/tmp", prefix="graphrag-checks-")).resolve()
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
async def embedded(data_dir: Path) -> AsyncIterator[EmbeddedPostgres]:
    async with EmbeddedPostgres(data_dir) as pg:
        yield pg


async def test_the_self_check_passes_at_the_configured_dimensions(
    embedded: EmbeddedPostgres,
) -> None:
    for dimension in (1, 384, 1536, 4096):
        await embedded.check_vector(dimension)


async def _hold_extension_lock(dsn: str) -> asyncpg.Connection:
    """A transaction that created the extension and did not commit: the self-check's CREATE
    EXTENSION IF NOT EXISTS waits on it."""
    holder = await asyncpg.connect(dsn)
    await holder.execute("DROP EXTENSION IF EXISTS vector")
    await holder.execute("BEGIN")
    await holder.execute("CREATE EXTENSION vector")
    return holder


async def _waiting_probes(dsn: str) -> list[int]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            """SELECT pid FROM pg_stat_activity
               WHERE wait_event_type = 'Lock' AND query ILIKE 'CREATE EXTENSION IF NOT%'"""
        )
        return [r["pid"] for r in rows]
    finally:
        await conn.close()


async def _sigill_the_waiting_backend(dsn: str) -> int:
    async def waits() -> bool:
        return bool(await _waiting_probes(dsn))

    await assert_eventually(waits, timeout_s=30, what="the self-check waits on the lock")
    [pid] = await _waiting_probes(dsn)
    os.kill(pid, signal.SIGILL)
    return pid


async def test_an_illegal_instruction_in_the_self_check_names_extension_and_cpu(
    embedded: EmbeddedPostgres,
) -> None:
    holder = await _hold_extension_lock(embedded.dsn)
    try:
        check = asyncio.ensure_future(
            check_vector_distance(embedded.dsn, 384, embedded.pgdata / "log")
        )
        await _sigill_the_waiting_backend(embedded.dsn)
        with pytest.raises(PlatformError) as failure:
            await check
    finally:
        holder.terminate()
    message = str(failure.value)
    assert "pgvector extension (vector.so)" in message
    assert "illegal instruction" in message
    assert "384-dimension" in message
    assert "x86-64-v3" in message
    # PostgreSQL recovers on its own; the next check passes.
    await assert_eventually(
        lambda: _passes(embedded), timeout_s=30, what="PostgreSQL serves again after the crash"
    )


async def _passes(embedded: EmbeddedPostgres) -> bool:
    try:
        await embedded.check_vector(384)
    except PlatformError:
        return False
    return True


@pytest.mark.slow
async def test_the_server_exits_with_the_reason_when_the_self_check_fails(data_dir: Path) -> None:
    # The server attaches to the PostgreSQL this test started (the embedded database is shared
    # per data directory), so the test can hold the lock before the server's self-check runs.
    async with EmbeddedPostgres(data_dir) as pg:
        holder = await _hold_extension_lock(pg.dsn)
        try:
            server = ServerProcess("--data-dir", str(data_dir), "--listen-address", "127.0.0.1:0")
            starting = asyncio.ensure_future(server.start())
            await _sigill_the_waiting_backend(pg.dsn)
            with pytest.raises(AssertionError, match="server did not start"):
                await starting
            assert await server.wait() == 1
        finally:
            holder.terminate()
        # Stopped only once it has recovered: a stop in the middle of the crash reset waits a
        # minute for pg_ctl before the library kills it.
        await assert_eventually(
            lambda: _passes(pg), timeout_s=30, what="PostgreSQL serves again after the crash"
        )
    log = "".join(server.log)
    assert "cannot start" in log
    assert "pgvector extension (vector.so)" in log and "illegal instruction" in log, log
    assert "Traceback" not in log, log
