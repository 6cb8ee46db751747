"""StartTurn with long-term recall on 1,000-fact scopes vs the floor of one embedding + one
PostgreSQL query, measured in the same run at the same concurrency. See bench/README.md.

    .venv/bin/python bench/recall_turns.py [--duration-s 10] [--concurrency 1,16,64]
        [--facts 1000] [--scopes 16] [--episodes-ab] [--json-out bench/results/recall_turns.json]

--episodes-ab runs every phase twice in the one run, on a server with episodes (the default)
and on one with `--episodes=false`, and adds what episodes cost a turn: texts embedded per
StartTurn, an ingest of turns until indexed (bench/episode_cost.py) and the ratio of the two
servers' StartTurn p50 and p99.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import grpc
from episode_cost import counters, ingest, per_turn
from locomo_feed import metrics_url
from phases import run_driver
from recall_load import RecallOptions, usernames
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
    p.add_argument("--episodes-ab", action="store_true", help="with and without episodes")
    p.add_argument("--ingest-turns", type=int, default=20, help="per scope, --episodes-ab")
    p.add_argument(
        "--unique-questions",
        action="store_true",
        help="number each question (no two alike), for a run with the embedding cache on",
    )
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
    if args.unique_questions:
        command.append("--unique-questions")

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
    for r in report["episodes_ab"]:
        print(
            f"  episodes on / off, {r['concurrency']:>3} in flight: StartTurn p50 "
            f"{fmt(r['p50_ms'][0])} / {fmt(r['p50_ms'][1])} ms ({fmt(r['p50_ratio'])}x), p99 "
            f"{fmt(r['p99_ms'][0])} / {fmt(r['p99_ms'][1])} ms ({fmt(r['p99_ratio'])}x); texts "
            f"embedded per StartTurn {r['texts_embedded_per_start_turn']}"
        )
    for name, run in report["runs"].items():
        if run["ingest"]:
            print(f"  ingest, {name}: {run['ingest']}")
    print_server_outcome(report)


def run_server(
    args: argparse.Namespace, server_args: list[str], plan: list[tuple[str, int]]
) -> dict[str, Any]:
    """Seed, then the plan's phases, on one server; with --episodes-ab also texts embedded per
    StartTurn in each phase and an ingest of turns until indexed."""
    phases: list[dict[str, Any]] = []
    ingested: dict[str, Any] = {}
    with serving([*server_args, "--metrics-address=127.0.0.1:0"]) as server:
        url = metrics_url(list(server.log))
        dsn = server.dsn()
        print("seeding ...", file=sys.stderr, flush=True)
        seeded = run_phase(server, args, dsn, "seed", args.scopes)
        print(f"seeded: {seeded}", file=sys.stderr, flush=True)
        for scenario, n in plan:
            print(f"phase {scenario} @ {n} ...", file=sys.stderr, flush=True)
            before = counters(url)
            phase = run_phase(server, args, dsn, scenario, n)
            phases.append(
                phase | {"texts_embedded_per_start_turn": per_turn(before, counters(url))}
            )
        if args.episodes_ab:
            users = usernames(args.tag, "facts", args.scopes)
            ingested = asyncio.run(ingest(server.address, url, users, args.ingest_turns))
    return {
        "server_args": server_args,
        "seed": {k: v for k, v in seeded.items() if k not in ("event", "scenario")},
        "phases": phases,
        "ratios": ratios(phases, [n for _, n in plan if _ == "recall"]),
        "ingest": ingested,
        "server": server_outcome(server),
    }


def episodes_ab(on: dict[str, Any], off: dict[str, Any], levels: list[int]) -> list[dict[str, Any]]:
    """StartTurn (recall) with episodes ÷ without, per concurrency, and texts embedded."""
    rows = []
    for n in levels:
        a, b = find_phase(on["phases"], "recall", n), find_phase(off["phases"], "recall", n)
        row: dict[str, Any] = {"concurrency": n}
        for q in ("p50_ms", "p99_ms"):
            row[q] = [only(a).get(q), only(b).get(q)]
            row[f"{q[:3]}_ratio"] = ratio(only(a).get(q), only(b).get(q))
        row["texts_embedded_per_start_turn"] = [
            (a or {}).get("texts_embedded_per_start_turn"),
            (b or {}).get("texts_embedded_per_start_turn"),
        ]
        rows.append(row)
    return rows


def main() -> None:
    args = parse_args()
    levels = [int(x) for x in args.concurrency.split(",") if x.strip()]
    if args.drive:
        import recall_load

        fields = ("dsn", "duration_s", "warmup_s", "scopes", "facts", "seed_turns", "tag",
                  "unique_questions")  # fmt: skip
        opts = {k: getattr(args, k) for k in fields}
        recall_load.run(RecallOptions(args.target, scenario=args.drive, concurrency=levels[0],
                                      **opts))  # fmt: skip
        return
    args.tag = uuid.uuid4().hex[:8]
    wanted = args.phases.split(",")
    plan = [(p, n) for n in levels for p in PHASES if p in wanted]
    load_before = os.getloadavg()
    # The phases cycle through 64 questions: the server's embedding cache would answer all but
    # the first 64, which real questions would not, so it is off (the floor has none either).
    server_args = [
        f"--max-facts-per-scope={max(args.facts, 1)}",
        "--embedding-cache-size=0",
        *args.server_arg,
    ]
    started = time.time()
    runs = {"episodes": run_server(args, server_args, plan)}
    if args.episodes_ab:
        runs["no episodes"] = run_server(args, [*server_args, "--episodes=false"], plan)
    first = runs["episodes"]
    report = {
        "meta": {
            **run_meta(started),
            "loadavg_before": [round(x, 2) for x in load_before],
            "loadavg_after": [round(x, 2) for x in os.getloadavg()],
            "grpcio": grpc.__version__,
            "args": {k: str(v) for k, v in vars(args).items() if k not in ("drive", "dsn")},
            "layout": f"worker i: own conversation in scope i mod {args.scopes}",
        },
        **first,
        "runs": runs,
        "episodes_ab": episodes_ab(first, runs["no episodes"], levels) if args.episodes_ab else [],
    }
    print_report(report)
    write_report(args.json_out, report)


if __name__ == "__main__":
    main()
