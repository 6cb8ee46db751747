"""A server setting swept over LoCoMo dev, then chosen by leave-one-conversation-out.

    .venv/bin/python bench/crossval_sweep.py --setting ltm_off_subject_weight \\
        --values 0.6,0.7,0.8,0.9,1.0 [--limit-conversations N] [--keep-runs DIR] \\
        [--server-arg=--ltm-second-hop-weight --server-arg=0.5] [--full]

Each value is one full run of bench/locomo_recall.py with `--<setting> <value>` given to its
server (its own server and data dir each time), scored by the server's own ranking: R@10 per
question from the run's per-question JSON. The folds (bench/crossval.py) then choose the value
on four conversations and score it on the fifth. What the time-intent weight's replay cannot
show, the settings that change which candidates the server finds, is measured here, at the cost
of one run per value. A run stores and asks only the reference setup (locomo_recall.py
--served-only, about 3 minutes on a quiet 2-core machine); `--full` makes each the whole bench.
`--server-arg` fixes another setting for every run (sweeping one constant at another's value).
`--one-ingest`, for a setting the server reads only when it searches (READ_TIME): one server
stores and indexes the reference setup once, and each value is a second server on the same
database that only asks (as bench/locomo_links.py does), about a minute a value instead of three.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import grpc
import locomo_recall as recall_bench
from crossval import leave_one_out, print_folds
from locomo_data import DEFAULT_DATA, Conversation, load
from locomo_scoring import recall_at
from rpc import PROBE_TOP_K
from serverproc import BenchServer, unwind_on_sigterm

from memory_client.v1 import memory_pb2_grpc as pb_grpc
from memory_server.settings import Settings

BENCH = Path(__file__).resolve().parent
# Settings the server reads only when it searches: one ingest serves every value.
READ_TIME = frozenset(
    {
        "ltm_link_decay",
        "ltm_link_seeds",
        "ltm_neighbour_decay",
        "ltm_time_intent_weight",
        "ltm_common_word_share",
        "ltm_off_subject_weight",
        "ltm_second_hop_weight",
        "ltm_second_hop_bridges",
    }
)
CONCURRENCY = 16  # AddFact calls and index checks in flight, as locomo_recall.py's default
KS = (1, 5, 10, 20)
Run = tuple[list[tuple[str, float]], dict[str, Any]]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--setting", required=True, help="a Settings field, e.g. ltm_off_subject_weight")
    p.add_argument("--values", required=True, help="comma-separated values to sweep")
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo json (read in place)")
    p.add_argument("--limit-conversations", type=int, default=None)
    p.add_argument("--server-arg", action="append", default=[], help="extra server flag")
    p.add_argument("--full", action="store_true", help="the whole bench each run, not served-only")
    p.add_argument(
        "--one-ingest",
        action="store_true",
        help="one ingest, one asking server per value (settings read at search time only)",
    )
    p.add_argument("--keep-runs", type=Path, default=None, help="keep each run's JSON here")
    p.add_argument("--json-out", type=Path, default=Path("bench/results/crossval_sweep.json"))
    args = p.parse_args(argv)
    fields = {f.name for f in dataclasses.fields(Settings)}
    if args.setting not in fields:
        p.error(f"--setting: not a server setting: {args.setting}")
    args.grid = sorted({float(v) for v in args.values.split(",") if v.strip()})
    if len(args.grid) < 2:
        p.error("--values: at least two")
    if args.one_ingest and (args.full or args.setting not in READ_TIME):
        p.error("--one-ingest: only for a setting read at search time, without --full")
    return args


def question_r10(row: dict[str, Any]) -> float:
    """R@10 of one question of a recall bench report, from its served ranking."""
    return recall_at(set(row["evidence"]), row["ranked"], 10)


def bench_command(args: argparse.Namespace, value: float, out: Path) -> list[str]:
    """The recall bench's command line for one value of the swept setting."""
    flag = "--" + args.setting.replace("_", "-")
    command = [
        sys.executable,
        str(BENCH / "locomo_recall.py"),
        "--data",
        str(args.data),
        "--json-out",
        str(out),
        f"--server-arg={flag}",
        f"--server-arg={value:g}",
        *(f"--server-arg={a}" for a in args.server_arg),
    ]
    if not args.full:
        command.append("--served-only")
    if args.limit_conversations is not None:
        command += ["--limit-conversations", str(args.limit_conversations)]
    return command


def one_run(args: argparse.Namespace, value: float, out: Path) -> Run:
    command = bench_command(args, value, out)
    print(f"{args.setting} = {value:g}: {' '.join(command[1:])}", flush=True)
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    report = json.loads(out.read_text())
    return _per_question(report)


def _per_question(report: dict[str, Any]) -> Run:
    return [(row["sample_id"], question_r10(row)) for row in report["per_question"]], report[
        "recall"
    ]


async def _store(address: str, conversations: list[Conversation]) -> dict[str, dict[str, str]]:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = pb_grpc.MemoryServiceStub(channel)
        setups = (recall_bench.REFERENCE,)
        fact_to_turn, added = await recall_bench.ingest(stub, conversations, CONCURRENCY, setups)
        index = await recall_bench.wait_for_index(stub, conversations, added, CONCURRENCY, 600)
    print(f"ingest: {index}", flush=True)
    return fact_to_turn


async def _ask(
    address: str, conversations: list[Conversation], fact_to_turn: dict[str, dict[str, str]]
) -> dict[str, Any]:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = pb_grpc.MemoryServiceStub(channel)
        found, latencies = await recall_bench.ask_all(
            stub, conversations, fact_to_turn, PROBE_TOP_K, 1, "search"
        )
    return recall_bench.served_only(found, conversations, latencies, KS)


def one_ingest_runs(args: argparse.Namespace, runs: Path) -> dict[float, Run]:
    """Every value on one stored and indexed reference setup: the writer stores, a server per
    value on the same database asks."""
    conversations = load(args.data, args.limit_conversations)
    fixed = ["--max-facts-per-scope", "5000", *args.server_arg]
    flag = "--" + args.setting.replace("_", "-")
    out: dict[float, Run] = {}
    with BenchServer(fixed) as writer:
        fact_to_turn = asyncio.run(_store(writer.address, conversations))
        for value in args.grid:
            print(f"{args.setting} = {value:g} (one ingest)", flush=True)
            with BenchServer(["--database-url", writer.dsn(), *fixed, flag, f"{value:g}"]) as r:
                report = asyncio.run(_ask(r.address, conversations, fact_to_turn))
            (runs / f"{args.setting}-{value:g}.json").write_text(json.dumps(report) + "\n")
            out[value] = _per_question(report)
    return out


def print_tables(tables: dict[str, dict[str, Any]]) -> None:
    """R@10 +- SE by value, overall and per category (the served ranking, every dev question)."""
    groups = list(next(iter(tables.values())))
    print(f"{'value':<8}" + "".join(f"{g[:16]:>18}" for g in groups))
    for value, table in tables.items():
        cells = "".join(f"{table[g]['R@10']:>11.1f} ±{table[g]['SE@10']:>4.1f}" for g in groups)
        print(f"{value:<8}{cells}")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    unwind_on_sigterm()
    with tempfile.TemporaryDirectory(prefix="graphrag-memory-crossval-") as tmp:
        runs = args.keep_runs or Path(tmp)
        runs.mkdir(parents=True, exist_ok=True)
        if args.one_ingest:
            runs_by_value = one_ingest_runs(args, runs)
        else:
            runs_by_value = {
                v: one_run(args, v, runs / f"{args.setting}-{v:g}.json") for v in args.grid
            }
    scores = {v: per_question for v, (per_question, _) in runs_by_value.items()}
    tables = {f"{v:g}": table for v, (_, table) in runs_by_value.items()}
    cv = dataclasses.asdict(leave_one_out(scores))
    whole = {
        f"{v:g}": round(100 * sum(s for _, s in scores[v]) / len(scores[v]), 2) for v in scores
    }
    print(
        "\nR@10 on every dev question, by value: " + ", ".join(f"{k} {r}" for k, r in whole.items())
    )
    print_tables(tables)
    default = getattr(Settings(), args.setting)
    print_folds(f"{args.setting}, R@10 (served ranking)", cv, float(default))
    args.json_out.parent.mkdir(parents=True, exist_ok=True)
    args.json_out.write_text(
        json.dumps(
            {
                "setting": args.setting,
                "grid": args.grid,
                "default": default,
                "server_args": args.server_arg,
                "r10_all_questions": whole,
                "recall_by_value": tables,
                "crossval": cv,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {args.json_out}")


if __name__ == "__main__":
    main()
