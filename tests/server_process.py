"""The server as a real process (`python -m memory_server ARGS`), for tests that need one: its
port, parsed from the "listening on" line, and its stderr, read to the end in a thread so the
server never blocks on a full pipe and kept in `log`."""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc


def database_dsn(pgdata: Path) -> str:
    """The embedded PostgreSQL of a server process, over its Unix socket (from postmaster.pid)."""
    socket_dir = (pgdata / "postmaster.pid").read_text().splitlines()[4]
    return f"postgresql://postgres:@/graphrag_memory?host={socket_dir}"


_LISTENING = re.compile(r"listening on [\d.]+:(\d+)")


class ServerProcess:
    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.args = args
        self.env = env  # the whole environment; None: this process's
        self.process: subprocess.Popen[str] | None = None
        self.port = 0
        self.log: list[str] = []
        self._drain: asyncio.Future[None] | None = None

    async def start(self, timeout_s: float = 60) -> ServerProcess:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "memory_server", *self.args],
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
            env=self.env,
        )
        assert self.process.stderr is not None
        stderr = self.process.stderr
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            line = await asyncio.to_thread(stderr.readline)
            if not line:
                break
            self.log.append(line)
            match = _LISTENING.search(line)
            if match:
                self.port = int(match[1])
                self._drain = asyncio.ensure_future(asyncio.to_thread(self._read_rest))
                return self
        raise AssertionError("server did not start:\n" + "".join(self.log))

    def _read_rest(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        for line in self.process.stderr:
            self.log.append(line)

    def channel(self) -> grpc.aio.Channel:
        return grpc.aio.insecure_channel(f"127.0.0.1:{self.port}")

    def kill(self, sig: int) -> None:
        assert self.process is not None
        self.process.send_signal(sig)

    async def wait(self, timeout_s: float = 30) -> int:
        assert self.process is not None
        code = await asyncio.to_thread(self.process.wait, timeout_s)
        if self._drain is not None:
            await self._drain
        assert self.process.stderr is not None
        self.process.stderr.close()
        return code

    async def stop(self, timeout_s: float = 30) -> int:
        """SIGTERM (unless it already exited) and its exit code; SIGKILL if it hangs."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return await self.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return await self.wait(10)
