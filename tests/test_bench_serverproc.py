"""bench/serverproc.py, which every benchmark starts its server with: the server's PostgreSQL is
reachable through `dsn()`, and `restart()` keeps the data dir and applies what ALTER SYSTEM set
(bench/profile_server.py turns pg_stat_statements on that way)."""

from __future__ import annotations

import importlib
from pathlib import Path

import asyncpg
import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


@pytest.mark.slow
async def test_a_restart_keeps_the_data_and_applies_alter_system(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    serverproc = importlib.import_module("serverproc")
    with serverproc.BenchServer() as server:
        conn = await asyncpg.connect(server.dsn())
        try:
            await conn.execute("ALTER SYSTEM SET work_mem = '7MB'")
            assert await conn.fetchval("SHOW work_mem") != "7MB"  # not before a restart
        finally:
            await conn.close()
        first = server.process.pid
        server.restart()
        assert server.process.pid != first and server.address
        conn = await asyncpg.connect(server.dsn())
        try:
            assert await conn.fetchval("SHOW work_mem") == "7MB"
        finally:
            await conn.close()
    assert server.exit_code == 0
    assert not server.postgres_left_running
    assert not server.data_dir.exists()
