"""The run's results as ghz reports them: its JSON document (durations in nanoseconds, the
histogram's marks in seconds) and its human summary."""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

PERCENTILES = (10, 25, 50, 75, 90, 95, 99)
HISTOGRAM_BUCKETS = 10
BAR_WIDTH = 40
MAX_DETAILS = 1_000_000  # ghz's maxResult


@dataclass(frozen=True, slots=True)
class Result:
    """One finished call: wall-clock start, latency (ns), status name (ghz/Go spelling: "OK",
    "InvalidArgument", …) and the error text ("" when OK)."""

    timestamp: datetime
    latency_ns: int
    status: str
    error: str = ""


@dataclass
class Collector:
    results: list[Result] = field(default_factory=list)

    def add(self, result: Result) -> None:
        self.results.append(result)


def rfc3339(moment: datetime, *, fraction: bool = True) -> str:
    local = moment.astimezone()
    return local.isoformat(timespec="microseconds" if fraction else "seconds")


def latency_distribution(ok_seconds: list[float]) -> list[dict[str, Any]]:
    """ghz's nearest-rank percentiles over the sorted OK latencies."""
    size = len(ok_seconds)
    out: list[dict[str, Any]] = []
    for p in PERCENTILES:
        position = p / 100 * size
        index = int(position)
        if position == index:
            index -= 1
        index = max(index, 0)
        out.append({"percentage": p, "latency": round(ok_seconds[index] * 1e9)})
    return out


def histogram(ok_seconds: list[float]) -> list[dict[str, Any]]:
    """ghz's 10 equal buckets from fastest to slowest (11 marks, in seconds)."""
    fastest, slowest = ok_seconds[0], ok_seconds[-1]
    step = (slowest - fastest) / HISTOGRAM_BUCKETS
    marks = [fastest + step * i for i in range(HISTOGRAM_BUCKETS)] + [slowest]
    counts = [0] * len(marks)
    bucket = 0
    for value in ok_seconds:
        while value > marks[bucket] and bucket < len(marks) - 1:
            bucket += 1
        counts[bucket] += 1
    return [
        {"mark": mark, "count": count, "frequency": count / len(ok_seconds)}
        for mark, count in zip(marks, counts, strict=True)
    ]


def build_report(
    results: list[Result],
    *,
    options: dict[str, Any],
    total_ns: int,
    end_reason: str,
    name: str = "",
) -> dict[str, Any]:
    """The report document, with ghz's field names and units."""
    status = Counter(r.status for r in results)
    errors = Counter(r.error for r in results if r.error)
    report: dict[str, Any] = {}
    if name:
        report["name"] = name
    report.update(
        {
            "endReason": end_reason,
            "options": options,
            "date": rfc3339(datetime.now(), fraction=False),
            "count": len(results),
            "total": total_ns,
            "average": 0,
            "fastest": 0,
            "slowest": 0,
            "rps": 0.0,
            "errorDistribution": dict(errors),
            "statusCodeDistribution": dict(status),
            "latencyDistribution": None,
            "histogram": None,
            "details": None,
        }
    )
    if not results:
        return report
    report["average"] = round(sum(r.latency_ns for r in results) / len(results))
    report["rps"] = len(results) / (total_ns / 1e9) if total_ns > 0 else 0.0
    ok = sorted(r.latency_ns / 1e9 for r in results if not r.error)
    if ok:
        report["fastest"] = round(ok[0] * 1e9)
        report["slowest"] = round(ok[-1] * 1e9)
        report["histogram"] = histogram(ok)
        report["latencyDistribution"] = latency_distribution(ok)
    report["details"] = [
        {
            "timestamp": rfc3339(r.timestamp),
            "latency": r.latency_ns,
            "error": r.error,
            "status": r.status,
        }
        for r in results[:MAX_DETAILS]
    ]
    return report


def ghz_options(
    *,
    host: str,
    call: str,
    insecure: bool,
    total: int,
    concurrency: int,
    connections: int,
    duration_ns: int,
    timeout_ns: int,
    data: Any,
    name: str,
    metadata: dict[str, str] | None,
) -> dict[str, Any]:
    """The report's `options` (ghz omits empty values, except `insecure`, `binary`, `CPUs`)."""
    out: dict[str, Any] = {"host": host, "call": call, "insecure": insecure}
    for key, value in (
        ("total", total),
        ("concurrency", concurrency),
        ("connections", connections),
        ("duration", duration_ns),
        ("timeout", timeout_ns),
    ):
        if value:
            out[key] = value
    if data is not None:
        out["data"] = data
    out["binary"] = False
    if metadata:
        out["metadata"] = metadata
    out["CPUs"] = os.cpu_count() or 1
    if name:
        out["name"] = name
    return out


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.2f} ms"


def summary(report: dict[str, Any]) -> str:
    """ghz's `summary` format."""
    lines = [
        "",
        "Summary:",
        *([f"  Name:\t{report['name']}"] if report.get("name") else []),
        f"  Count:\t{report['count']}",
        f"  Total:\t{_ms(report['total'])}",
        f"  Slowest:\t{_ms(report['slowest'])}",
        f"  Fastest:\t{_ms(report['fastest'])}",
        f"  Average:\t{_ms(report['average'])}",
        f"  Requests/sec:\t{report['rps']:.2f}",
        "",
        "Response time histogram:",
    ]
    buckets = report["histogram"] or []
    top = max((b["count"] for b in buckets), default=0)
    for bucket in buckets:
        bar = "∎" * (bucket["count"] * BAR_WIDTH // top if top else 0)
        lines.append(f"  {bucket['mark'] * 1000:.3f} [{bucket['count']}]\t|{bar}")
    lines += ["", "Latency distribution:"]
    for item in report["latencyDistribution"] or []:
        lines.append(f"  {item['percentage']} % in {_ms(item['latency'])} ")
    lines += ["", "Status code distribution:"]
    for code, count in sorted(report["statusCodeDistribution"].items(), key=lambda kv: -kv[1]):
        lines.append(f"  [{code}]\t{count} responses")
    if report["errorDistribution"]:
        lines += ["", "Error distribution:"]
        for error, count in sorted(report["errorDistribution"].items(), key=lambda kv: -kv[1]):
            lines.append(f"  [{count}]\t{error}")
    return "\n".join(lines) + "\n"
