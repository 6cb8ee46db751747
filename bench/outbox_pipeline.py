"""Ingest until indexed with the outbox sending one batch at a time (`--outbox-batches-in-flight
1`) and with the next batch claimed and embedded while the one before it writes (2, the
default), fresh servers in alternation, in one run.

    .venv/bin/python bench/outbox_pipeline.py [--scopes 8] [--facts 250] [--bulk 250] \
        [--concurrency 16] [--in-flight 1,2] [--rounds 2] \
        [--json-out bench/results/outbox_pipeline.json]

Ingest is profile_server's: recall_texts' short facts, `--scopes` scopes of `--facts`, through
AddFacts (`--bulk` per call) or AddFact (`--bulk 0`, `--concurrency` in flight), timed until the
last fact of every scope is found by its vector. The floor, measured in the same run before and
after: the same texts straight on the model in batches of 32.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import grpc
from profile_server import ingest
from recall_texts import scope_facts
from serverproc import BenchServer

from memory_client.v1 import memory_pb2_grpc as pb_grpc
from memory_server.embedding.minilm import MiniLMBackend


def floor(args: argparse.Namespace) -> float:
    """Texts/s of the model alone on the run's texts, batches of 32."""
    texts = [t for i in range(args.scopes) for t in scope_facts(100 + i, args.facts)]
    backend = MiniLMBackend()
    backend.load()
    backend.embed_batch(texts[:32])
    began = time.perf_counter()
    for i in range(0, len(texts), 32):
        backend.embed_batch(texts[i : i + 32])
    rate = len(texts) / (time.perf_counter() - began)
    backend.close()
    return rate


async def one(in_flight: int, args: argparse.Namespace) -> dict[str, Any]:
    with BenchServer(["--outbox-batches-in-flight", str(in_flight)]) as server:
        async with grpc.aio.insecure_channel(server.address) as channel:
            stub = pb_grpc.MemoryServiceStub(channel)
            users = [f"pipeline-{i}" for i in range(args.scopes)]
            began = time.perf_counter()
            await ingest(stub, users, args)
            seconds = time.perf_counter() - began
        problems = list(server.problems)
    facts = args.scopes * args.facts
    return {"in_flight": in_flight, "seconds": round(seconds, 2),
            "per_s": round(facts / seconds, 1), "problems": problems}  # fmt: skip


async def run(args: argparse.Namespace) -> dict[str, Any]:
    in_flight = [int(x) for x in args.in_flight.split(",") if x]
    floors = [floor(args)]
    runs = []
    for round_ in range(args.rounds):
        for n in in_flight:
            row = await one(n, args)
            row["round"] = round_ + 1
            print(f"round {round_ + 1}, {n} in flight: {row['per_s']} facts/s", flush=True)
            runs.append(row)
    floors.append(floor(args))
    medians = {n: statistics.median(r["per_s"] for r in runs if r["in_flight"] == n)
               for n in in_flight}  # fmt: skip
    return {
        "facts": args.scopes * args.facts,
        "bulk": args.bulk,
        "floor_texts_per_s": [round(f, 1) for f in floors],
        "runs": runs,
        "median_per_s": medians,
        "vs_first": {n: round(m / medians[in_flight[0]], 3) for n, m in medians.items()},
        "vs_floor": {n: round(m / statistics.mean(floors), 3) for n, m in medians.items()},
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--scopes", type=int, default=8)
    p.add_argument("--facts", type=int, default=250)
    p.add_argument("--bulk", type=int, default=250, help="AddFacts per call; 0 = AddFact")
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--in-flight", default="1,2")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--json-out", type=Path, default=Path("bench/results/outbox_pipeline.json"))
    args = p.parse_args()
    result = asyncio.run(run(args))
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}, indent=2))
    args.json_out.parent.mkdir(parents=True, exist_ok=True)
    args.json_out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
