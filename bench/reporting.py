"""What every benchmark's report shares: the run's metadata, the server's exit status, the JSON
file, and SIGTERM unwinding like Ctrl-C (so the server is always stopped, its dir removed)."""

from __future__ import annotations

import json
import os
import platform
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

from serverproc import BenchServer


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def unwind_on_sigterm() -> None:
    signal.signal(signal.SIGTERM, _interrupt)


def run_meta(started: float) -> dict[str, Any]:
    """The command, when it started, how long it ran and on what."""
    return {
        "command": " ".join(sys.orig_argv),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
        "wall_s": round(time.time() - started, 1),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }


def server_outcome(server: BenchServer) -> dict[str, Any]:
    return {
        "exit_code": server.exit_code,
        "postgres_left_running": server.postgres_left_running,
        "problems": server.problems,
    }


def print_server_outcome(report: dict[str, Any]) -> None:
    server = report["server"]
    print(
        f"\nServer exit code {server['exit_code']}; PostgreSQL left running: "
        f"{server['postgres_left_running']}; log warnings/errors: {len(server['problems'])}"
    )


def write_report(path: Path, report: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {path}")
