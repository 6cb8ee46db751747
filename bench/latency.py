"""Latency recording and summaries (nearest-rank percentiles, no numpy)."""

from __future__ import annotations

import math
import statistics
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any


def percentile(ordered: list[float], p: float) -> float:
    """Nearest-rank percentile of an already sorted list; NaN when empty."""
    if not ordered:
        return math.nan
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


@dataclass
class Recorder:
    """Keeps every latency of calls that complete inside the measured window
    [start, end] (perf_counter seconds). Errors are counted over the whole phase, warm-up
    included, so none goes unseen."""

    start: float
    end: float
    latencies: dict[str, list[float]] = field(default_factory=dict)
    errors: dict[str, Counter[str]] = field(default_factory=dict)

    def running(self) -> bool:
        return time.perf_counter() < self.end

    def record(self, rpc: str, began: float, ended: float, code: str | None = None) -> None:
        if code is not None:
            self.errors.setdefault(rpc, Counter())[code] += 1
        elif self.start <= ended <= self.end:
            self.latencies.setdefault(rpc, []).append(ended - began)

    def summary(self) -> dict[str, dict[str, Any]]:
        window = self.end - self.start
        names = sorted(set(self.latencies) | set(self.errors))
        return {
            name: summarize(self.latencies.get(name, []), window, self.errors.get(name))
            for name in names
        }


def ms_summary(latencies_ms: Iterable[float], ndigits: int = 2) -> dict[str, float | None]:
    """p50, p95, p99 (nearest rank), mean and max of latencies in ms, rounded; None when there
    are none."""
    ordered = sorted(latencies_ms)

    def at(value: float) -> float | None:
        return None if math.isnan(value) else round(value, ndigits)

    return {
        "p50_ms": at(percentile(ordered, 50)),
        "p95_ms": at(percentile(ordered, 95)),
        "p99_ms": at(percentile(ordered, 99)),
        "mean_ms": at(statistics.fmean(ordered) if ordered else math.nan),
        "max_ms": at(ordered[-1] if ordered else math.nan),
    }


def calls_summary(latencies_s: Sequence[float]) -> dict[str, float | None]:
    """The count of calls and `ms_summary` of their latencies, given in seconds."""
    return {"count": len(latencies_s), **ms_summary(s * 1000 for s in latencies_s)}


def summarize(
    latencies: list[float], window_s: float, errors: Counter[str] | None = None
) -> dict[str, Any]:
    """A measured window's calls (latencies in seconds): count, throughput, `ms_summary`, and
    errors by status code."""
    return {
        "count": len(latencies),
        "throughput_per_s": round(len(latencies) / window_s, 1),
        **ms_summary((s * 1000 for s in latencies), 3),
        "errors": dict(errors or {}),
    }
