"""What every benchmark's report shares: the run's metadata, the server's exit status, the JSON
file, a progress line, and the table of a run's phases."""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from serverproc import BenchServer


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


def markdown_table(columns: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A Markdown table, a column right-aligned when every cell it has is a number; None is
    an empty cell."""
    cells = [["" if c is None else c for c in row] for row in rows]

    def numeric(i: int) -> bool:
        have = [row[i] for row in cells if row[i] != ""]
        return bool(have) and all(
            isinstance(c, int | float) and not isinstance(c, bool) for c in have
        )

    lines = ["| " + " | ".join(columns) + " |"]
    lines.append("|" + "".join("---:|" if numeric(i) else "---|" for i in range(len(columns))))
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in cells]
    return "\n".join(lines)


class Progress:
    """One stderr line updated in place on a terminal; elsewhere (a log file, CI) a plain line
    at most every 10 s and at the end, never carriage-return frames."""

    def __init__(self, label: str, total: int) -> None:
        self.label, self.total, self.done = label, total, 0
        self.started = time.monotonic()
        self._shown = 0.0
        self._in_place = sys.stderr.isatty()
        self._every_s = 0.2 if self._in_place else 10.0
        self._draw(force=True)

    def step(self, n: int = 1) -> None:
        self.done += n
        self._draw(force=self.done >= self.total)

    def _draw(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._shown < self._every_s:
            return
        self._shown = now
        width = 30
        filled = int(width * self.done / self.total) if self.total else width
        elapsed = now - self.started
        rate = self.done / elapsed if elapsed > 0 else 0.0
        line = f"{self.label:<12}[{'#' * filled}{'.' * (width - filled)}] "
        line += f"{self.done}/{self.total} {elapsed:5.1f}s {rate:6.1f}/s"
        if self._in_place:
            sys.stderr.write("\r" + line + ("\n" if self.done >= self.total else ""))
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()


# --- phases: a driver's result per scenario and concurrency (phases.run_driver) --------------


_CPU_SHORT = {"server": "srv", "postgres": "pg", "client": "cli", "other": "other"}


def fmt(value: float | None, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def ratio(a: float | None, b: float | None, ndigits: int = 2) -> float | None:
    return round(a / b, ndigits) if a is not None and b else None


def find_phase(phases: list[dict[str, Any]], scenario: str, n: int) -> dict[str, Any] | None:
    return next((p for p in phases if p["scenario"] == scenario and p["concurrency"] == n), None)


def print_phases(phases: list[dict[str, Any]], measured: str, cpu: tuple[str, ...]) -> None:
    """One row per measured call of each phase: throughput, latencies, errors by status code,
    and the CPU share of the processes named in `cpu` (phases.run_driver's cpu_percent)."""
    head = f"{'phase':<10}{'conc':>5}  {measured:<26}{'ok/s':>9}{'p50 ms':>9}{'p95 ms':>9}"
    head += f"{'p99 ms':>9}{'max ms':>9}  {'errors':<14}cpu% {'/'.join(_CPU_SHORT[k] for k in cpu)}"
    print("\n" + head + "\n" + "-" * len(head))
    for phase in phases:
        used = phase.get("cpu_percent", {})
        cpu_text = "/".join(str(used.get(k)) for k in cpu)
        for name, s in phase["rpcs"].items():
            errors = ",".join(f"{k}={v}" for k, v in s["errors"].items()) or "0"
            print(
                f"{phase['scenario']:<10}{phase['concurrency']:>5}  {name:<26}"
                f"{s['throughput_per_s']:>9.1f}{fmt(s['p50_ms']):>9}{fmt(s['p95_ms']):>9}"
                f"{fmt(s['p99_ms']):>9}{fmt(s['max_ms']):>9}  {errors:<14}{cpu_text}"
            )
        if phase.get("notes"):
            print(f"{'':<17}({', '.join(f'{k}={v}' for k, v in phase['notes'].items())})")
