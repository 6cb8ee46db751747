"""One benchmark phase in a fresh driver process: the driver prints JSON events on stdout
(measure_start, measure_end, result); at each mark the CPU time of the server, PostgreSQL, the
driver and the whole machine is sampled, so the result carries each one's CPU share of the
measured window."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Sequence
from typing import Any

import psutil
from serverproc import BenchServer


def run_driver(
    server: BenchServer,
    command: Sequence[str],
    label: str,
    on_mark: Callable[[str], None] = lambda mark: None,
) -> dict[str, Any]:
    """The driver's result event with `cpu_percent` (server, postgres, client, and `other`:
    whatever else ran on the machine meanwhile; another benchmark would distort this one)."""
    driver = subprocess.Popen(list(command), stdout=subprocess.PIPE, text=True)
    marks: dict[str, tuple[float, dict[str, float]]] = {}
    result: dict[str, Any] | None = None
    try:
        client = psutil.Process(driver.pid)
        assert driver.stdout is not None
        for line in driver.stdout:
            event = json.loads(line)
            if event["event"] == "result":
                result = event
                continue
            cpu = server.cpu_seconds()
            t = client.cpu_times()
            cpu["client"] = t.user + t.system
            cpu["machine"] = machine_busy_seconds()
            marks[event["event"]] = (time.monotonic(), cpu)
            on_mark(event["event"])
        if driver.wait() != 0 or result is None:
            raise RuntimeError(f"driver for {label} failed (exit {driver.returncode})")
    finally:
        if driver.poll() is None:
            driver.terminate()
            driver.wait(10)
    if "measure_start" in marks:
        (t0, cpu0), (t1, cpu1) = marks["measure_start"], marks["measure_end"]
        used = {k: round((cpu1[k] - cpu0[k]) / (t1 - t0) * 100) for k in cpu0}
        used["other"] = used.pop("machine") - used["server"] - used["postgres"] - used["client"]
        result["cpu_percent"] = used
    return result


def machine_busy_seconds() -> float:
    """CPU seconds all cores spent busy since boot."""
    t = psutil.cpu_times()
    idle = (
        t.idle
        + getattr(t, "iowait", 0.0)
        + getattr(t, "guest", 0.0)
        + getattr(t, "guest_nice", 0.0)
    )
    return float(sum(t) - idle)
