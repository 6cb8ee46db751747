"""StartTurn with long-term recall on 1,000-fact scopes vs the floor of one embedding + one
PostgreSQL query, measured in the same run at the same concurrency. See bench/README.md.

    .venv/bin/python bench/recall_turns.py [--duration-s 10] [--concurrency 1,16,64]
        [--facts 1000] [--scopes 16] [--json-out bench/results/recall_turns.json]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import grpc
from phases import run_driver
from recall_load import RecallOptions
from reporting import (
    find_phase,
    fmt,
    print_phases,
    print_server_outcome,
    ratio,
    run_meta,
    server_outcome,
    write_report,
)
from serverproc import BenchServer, serving

PY_SPY = Path(sys.executable).with_name("py-spy")
PHASES = ("health", "floor", "floor-knn", "recall", "stm")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--duration-s", type=float, default=10.0, help="measured seconds per phase")
    p.add_argument("--warmup-s", type=float, default=1.0, help="unmeasured seconds first")
    p.add_argument("--concurrency", default="1,16,64", help="calls in flight, comma-separated")
    p.add_argument("--facts", type=int, default=1000, help="live facts per seeded scope")
    p.add_argument("--scopes", type=int, default=16, help="seeded scopes (workers spread)")
    p.add_argument("--seed-turns", type=int, default=10, help="prior turns per conversation")
    p.add_argument("--phases", default=",".join(PHASES), help="which phases, comma-separated")
    p.add_argument("--server-arg", action="append", default=[], help="extra server flag")
    p.add_argument("--profile-dir", type=Path, help="py-spy the server in each recall window")
    p.add_argument("--json-out", type=Path, default=Path("bench/results/recall_turns.json"))
    # Internal: run one scenario as the driver (its own process).
    p.add_argument("--drive", help=argparse.SUPPRESS)
    p.add_argument("--target", default="", help=argparse.SUPPRESS)
    p.add_argument("--dsn", default="", help=argparse.SUPPRESS)
    p.add_argument("--tag", default="", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def run_phase(
    server: BenchServer, args: argparse.Namespace, dsn: str, scenario: str, n: int
) -> dict[str, Any]:
    """One phase in a fresh driver process; CPU of server, PostgreSQL and driver is sampled at
    the driver's measure_start/measure_end marks (as in turns.py)."""
    command = [sys.executable, str(Path(__file__).resolve()), "--drive", scenario]
    command += ["--target", server.address, "--dsn", dsn, "--tag", args.tag]
    command += ["--concurrency", str(n)]
    for flag in ("duration_s", "warmup_s", "facts", "scopes", "seed_turns"):
        command += [f"--{flag.replace('_', '-')}", str(getattr(args, flag))]

    def on_mark(mark: str) -> None:
        if mark == "measure_start" and scenario == "recall" and args.profile_dir:
            profile(server, args, n)

    result = run_driver(server, command, f"{scenario}@{n}", on_mark)
    return result | {"scenario": scenario}  # loadgen calls Health/Check "floor"


def profile(server: BenchServer, args: argparse.Namespace, n: int) -> None:
    """py-spy (raw, 200 Hz, non-blocking) on the server for most of the measured window."""
    assert server.process is not None and args.profile_dir is not None
    args.profile_dir.mkdir(parents=True, exist_ok=True)
    command = [str(PY_SPY), "record", "--pid", str(server.process.pid), "--rate", "200"]
    command += ["--duration", str(max(1, int(args.duration_s) - 1)), "--format", "raw"]
    command += ["--nonblocking", "--output", str(args.profile_dir / f"server-recall-{n}.txt")]
    subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def only(phase: dict[str, Any] | None) -> dict[str, Any]:
    """The phase's one measured call (each phase measures one)."""
    return next(iter(phase["rpcs"].values())) if phase and phase["rpcs"] else {}


def ratios(phases: list[dict[str, Any]], levels: list[int]) -> list[dict[str, Any]]:
    out = []
    for n in levels:
        r = only(find_phase(phases, "recall", n))
        row: dict[str, Any] = {"concurrency": n}
        for base in ("floor", "floor-knn", "health", "stm"):
            b = only(find_phase(phases, base, n))
            for q in ("p50_ms", "p99_ms"):
                row[f"{q[:3]}_over_{base}"] = ratio(r.get(q), b.get(q))
        out.append(row)
    return out


def print_report(report: dict[str, Any]) -> None:
    s = report["seed"]
    if s:
        print(
            f"\nSeed: {s['scopes']} scopes x {s['facts_per_scope']} live facts "
            f"({s['standing_per_scope']} standing each) via AddFact at {s['add_fact_per_s']}/s; "
            f"indexed after {s['indexed_s']} s; vectors {s['vectors']}"
        )
    print_phases(report["phases"], "measured", ("server", "postgres", "client", "other"))
    print("\nStartTurn with recall ÷ baseline, same run, same concurrency (p50 / p99):")
    for r in report["ratios"]:
        parts = [
            f"{base} {fmt(r[f'p50_over_{base}'])}x / {fmt(r[f'p99_over_{base}'])}x"
            for base in ("floor", "floor-knn", "stm", "health")
        ]
        print(f"  {r['concurrency']:>3} in flight: " + "; ".join(parts))
    print_server_outcome(report)


def main() -> None:
    args = parse_args()
    levels = [int(x) for x in args.concurrency.split(",") if x.strip()]
    if args.drive:
        import recall_load

        fields = ("dsn", "duration_s", "warmup_s", "scopes", "facts", "seed_turns", "tag")
        opts = {k: getattr(args, k) for k in fields}
        recall_load.run(RecallOptions(args.target, scenario=args.drive, concurrency=levels[0],
                                      **opts))  # fmt: skip
        return
    args.tag = uuid.uuid4().hex[:8]
    wanted = args.phases.split(",")
    plan = [(p, n) for n in levels for p in PHASES if p in wanted]
    phases: list[dict[str, Any]] = []
    seeded: dict[str, Any] = {}
    load_before = os.getloadavg()
    # The phases cycle through 64 questions: the server's embedding cache would answer all but
    # the first 64, which real questions would not, so it is off (the floor has none either).
    server_args = [
        f"--max-facts-per-scope={max(args.facts, 1)}",
        "--embedding-cache-size=0",
        *args.server_arg,
    ]
    started = time.time()
    with serving(server_args) as server:
        dsn = server.dsn()
        print("seeding ...", file=sys.stderr, flush=True)
        seeded = run_phase(server, args, dsn, "seed", args.scopes)
        print(f"seeded: {seeded}", file=sys.stderr, flush=True)
        for scenario, n in plan:
            print(f"phase {scenario} @ {n} ...", file=sys.stderr, flush=True)
            phases.append(run_phase(server, args, dsn, scenario, n))
    report = {
        "meta": {
            **run_meta(started),
            "loadavg_before": [round(x, 2) for x in load_before],
            "loadavg_after": [round(x, 2) for x in os.getloadavg()],
            "grpcio": grpc.__version__,
            "args": {k: str(v) for k, v in vars(args).items() if k not in ("drive", "dsn")},
            "layout": f"worker i: own conversation in scope i mod {args.scopes}",
        },
        "seed": {k: v for k, v in seeded.items() if k not in ("event", "scenario")},
        "phases": phases,
        "ratios": ratios(phases, levels),
        "server": server_outcome(server),
    }
    print_report(report)
    write_report(args.json_out, report)


if __name__ == "__main__":
    main()
