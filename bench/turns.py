"""Turn benchmark for graphrag-memory: Health/Check floor, GraphRAG's turn (StartTurn +
CompleteTurn), and per-scope isolation under a hot scope. See bench/README.md.

    .venv/bin/python bench/turns.py [--duration-s 10] [--concurrency 1,16,64]
                                    [--json-out bench/results/turns.json]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import grpc
from loadgen import HEALTH, PAIR, START, START_HOT, START_OTHER, DriveOptions
from phases import run_driver
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

# The project's promises, at 64 calls in flight.
TARGET_THROUGHPUT_RATIO = 0.40  # StartTurn/s ÷ Health/Check/s, at least
TARGET_P99_RATIO = 3.0  # StartTurn p99 ÷ Health/Check p99, at most


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--duration-s", type=float, default=10.0, help="measured seconds per phase")
    p.add_argument("--warmup-s", type=float, default=1.0, help="unmeasured seconds first")
    p.add_argument("--concurrency", default="1,16,64", help="calls in flight, comma-separated")
    p.add_argument("--channels", type=int, default=1, help="gRPC channels the workers share")
    p.add_argument("--seed-turns", type=int, default=10, help="prior turns per conversation")
    p.add_argument("--hot-writers", type=int, default=100, help="isolation: hot scope writers")
    p.add_argument("--other-scopes", type=int, default=8, help="isolation: other scopes")
    p.add_argument("--scenarios", default="floor,turns,isolation", help="which to run")
    p.add_argument("--server-arg", action="append", default=[], help="extra server flag")
    p.add_argument("--json-out", type=Path, default=Path("bench/results/turns.json"))
    # Internal: run one scenario as the load driver (in its own process) against --target.
    p.add_argument("--drive", help=argparse.SUPPRESS)
    p.add_argument("--target", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def run_phase(
    server: BenchServer, args: argparse.Namespace, scenario: str, n: int
) -> dict[str, Any]:
    """One phase in a fresh driver process; CPU use of server, PostgreSQL and client is sampled
    at the driver's measure_start/measure_end marks."""
    command = [sys.executable, str(Path(__file__).resolve()), "--drive", scenario]
    command += ["--target", server.address, "--concurrency", str(n)]
    for flag in ("duration_s", "warmup_s", "channels", "seed_turns", "hot_writers"):
        command += [f"--{flag.replace('_', '-')}", str(getattr(args, flag))]
    return run_driver(server, command, f"{scenario}@{n}")


def promises(phases: list[dict[str, Any]], n: int) -> dict[str, Any]:
    floor, turns = find_phase(phases, "floor", n), find_phase(phases, "turns", n)
    if floor is None or turns is None:
        return {}
    h, s = floor["rpcs"].get(HEALTH, {}), turns["rpcs"].get(START, {})
    tput = ratio(s.get("throughput_per_s"), h.get("throughput_per_s"), 3)
    p99 = ratio(s.get("p99_ms"), h.get("p99_ms"), 3)
    return {
        "concurrency": n,
        "throughput_ratio": tput,
        "throughput_target_min": TARGET_THROUGHPUT_RATIO,
        "throughput_pass": tput is not None and tput >= TARGET_THROUGHPUT_RATIO,
        "p99_ratio": p99,
        "p99_target_max": TARGET_P99_RATIO,
        "p99_pass": p99 is not None and p99 <= TARGET_P99_RATIO,
    }


def isolation(phases: list[dict[str, Any]], n: int) -> dict[str, Any]:
    alone, hot = find_phase(phases, "iso-alone", n), find_phase(phases, "iso-hot", n)
    if alone is None or hot is None:
        return {}
    a, w, h = alone["rpcs"][START_OTHER], hot["rpcs"][START_OTHER], hot["rpcs"][START_HOT]
    return {
        "other_scopes": n,
        "hot_writers": hot["hot_writers"],
        "hot_layout": "one username+graphname, one conversation per writer",
        "others_alone": {k: a[k] for k in ("p50_ms", "p99_ms", "throughput_per_s")},
        "others_with_hot": {k: w[k] for k in ("p50_ms", "p99_ms", "throughput_per_s")},
        "hot_scope": {k: h[k] for k in ("p50_ms", "p99_ms", "throughput_per_s")},
        "p50_ratio_with_over_alone": ratio(w["p50_ms"], a["p50_ms"], 3),
        "p99_ratio_with_over_alone": ratio(w["p99_ms"], a["p99_ms"], 3),
        "hot_p50_over_others_p50": ratio(h["p50_ms"], w["p50_ms"], 3),
    }


def print_report(report: dict[str, Any]) -> None:
    print_phases(report["phases"], "rpc", ("server", "postgres", "client"))
    p = report["promises"]
    if p:
        n, verdict = p["concurrency"], {True: "PASS", False: "MISS"}
        print(f"\nPromises at {n} in flight:")
        print(
            f"  (a) StartTurn/s ÷ Health/Check/s = {fmt(p['throughput_ratio'], '.3f')}"
            f"  (target ≥ {TARGET_THROUGHPUT_RATIO})  {verdict[p['throughput_pass']]}"
        )
        print(
            f"  (b) StartTurn p99 ÷ Health/Check p99 = {fmt(p['p99_ratio'], '.3f')}"
            f"  (target ≤ {TARGET_P99_RATIO})  {verdict[p['p99_pass']]}"
        )
    iso = report["isolation"]
    if iso:
        a, w, h = iso["others_alone"], iso["others_with_hot"], iso["hot_scope"]
        print(f"\nIsolation: {iso['other_scopes']} other scopes, {iso['hot_writers']} writers on")
        print(f"  one hot scope ({iso['hot_layout']}); StartTurn only")
        print(f"  others alone     p50 {fmt(a['p50_ms'])} ms  p99 {fmt(a['p99_ms'])} ms")
        print(f"  others with hot  p50 {fmt(w['p50_ms'])} ms  p99 {fmt(w['p99_ms'])} ms")
        print(
            f"  ratio with/alone p50 {fmt(iso['p50_ratio_with_over_alone'])}x"
            f"  p99 {fmt(iso['p99_ratio_with_over_alone'])}x"
        )
        print(
            f"  hot scope        p50 {fmt(h['p50_ms'])} ms  p99 {fmt(h['p99_ms'])} ms"
            f"  ({h['throughput_per_s']:.1f}/s, serialized on its actor)"
        )
    print_server_outcome(report)


def main() -> None:
    args = parse_args()
    levels = [int(x) for x in args.concurrency.split(",") if x.strip()]
    if args.drive:
        import loadgen

        fields = ("duration_s", "warmup_s", "channels", "seed_turns", "hot_writers")
        opts = {k: getattr(args, k) for k in fields}
        loadgen.run(DriveOptions(args.target, args.drive, levels[0], **opts))
        return
    scenarios = set(args.scenarios.split(","))
    plan = [(s, n) for s in ("floor", "turns") if s in scenarios for n in levels]
    if "isolation" in scenarios:
        plan += [("iso-alone", args.other_scopes), ("iso-hot", args.other_scopes)]
    phases: list[dict[str, Any]] = []
    started = time.time()
    with serving(args.server_arg) as server:
        for scenario, n in plan:
            print(f"phase {scenario} @ {n} ...", file=sys.stderr, flush=True)
            phases.append(run_phase(server, args, scenario, n))
    n = 64 if 64 in levels else max(levels)
    report = {
        "meta": {
            **run_meta(started),
            "grpcio": grpc.__version__,
            "args": {k: str(v) for k, v in vars(args).items() if k not in ("drive", "target")},
            "turn_pair": f"{PAIR}: StartTurn start to CompleteTurn end; its ok/s is turn pairs/s",
        },
        "phases": phases,
        "promises": promises(phases, n),
        "isolation": isolation(phases, args.other_scopes),
        "server": server_outcome(server),
    }
    print_report(report)
    write_report(args.json_out, report)


if __name__ == "__main__":
    main()
