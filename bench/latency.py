"""Latency recording and summaries (nearest-rank percentiles, no numpy)."""

from __future__ import annotations

import math
import time
from collections import Counter
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


def summarize(
    latencies: list[float], window_s: float, errors: Counter[str] | None = None
) -> dict[str, Any]:
    ordered = sorted(latencies)

    def ms(value: float) -> float | None:
        return None if math.isnan(value) else round(value * 1000, 3)

    return {
        "count": len(ordered),
        "throughput_per_s": round(len(ordered) / window_s, 1),
        "p50_ms": ms(percentile(ordered, 50)),
        "p95_ms": ms(percentile(ordered, 95)),
        "p99_ms": ms(percentile(ordered, 99)),
        "mean_ms": ms(sum(ordered) / len(ordered) if ordered else math.nan),
        "max_ms": ms(ordered[-1] if ordered else math.nan),
        "errors": dict(errors or {}),
    }
