"""SearchFacts of a base revision against the working tree, in one run, calls alternating.

    .venv/bin/python bench/search_ab.py --base REV [--limit-conversations 2] [--rounds 3] \
        [--json-out bench/results/search_ab.json]

Two servers (`serverproc.BenchServer`, each on its own embedded PostgreSQL): one runs the base
revision's server package (`git archive REV server`, first on its PYTHONPATH; the bench checks
the server imported that copy), the other the working tree's. Both store LoCoMo's first
conversations as `mem0_side_by_side.py` does (each turn one fact, "Speaker: text", AddFacts
per conversation in dialogue order) and are waited on until each conversation's last fact is
indexed. Then every question of those conversations, `--rounds` times: SearchFacts (top 10,
threshold 0, one call in flight) on one server and then on the other, the first of the pair
alternating, so that both see the same machine. Reported: each side's p50 / p95, the ratio
tree ÷ base with a bootstrap 95 % interval over the questions, and each server's health check
measured the same way, the floor.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2_grpc as health_grpc
from latency import percentile
from locomo_data import DEFAULT_DATA, Conversation, load
from reporting import write_report
from rpc import Stored, search_and_floor, wait_indexed
from serverproc import BenchServer, revision_server

from memory_client.v1 import memory_pb2 as pb
from memory_client.v1 import memory_pb2_grpc as pb_grpc

GRAPH = "LoCoMo"


def imported_from(env: dict[str, str]) -> str:
    shown = subprocess.run(
        [sys.executable, "-c", "import memory_server; print(memory_server.__file__)"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return shown.stdout.strip()


class Side:
    def __init__(self, label: str, server: BenchServer) -> None:
        self.label = label
        self.channel = grpc.aio.insecure_channel(server.address)
        self.stub = pb_grpc.MemoryServiceStub(self.channel)
        self.health = health_grpc.HealthStub(self.channel)
        self.search_ms: list[float] = []
        self.health_ms: list[float] = []

    async def store(self, conversations: list[Conversation]) -> None:
        last: list[Stored] = []
        for c in conversations:
            reply = await self.stub.AddFacts(
                pb.AddFactsRequest(
                    username=c.sample_id,
                    graphname=GRAPH,
                    facts=[pb.NewFact(text=t.memory_text) for t in c.turns],
                ),
                timeout=300,
            )
            last.append(
                Stored(c.sample_id, GRAPH, c.turns[-1].memory_text, reply.facts[-1].fact_id)
            )
        await wait_indexed(self.stub, last, 600)

    async def search(self, username: str, question: str, measured: bool) -> None:
        took, check = await search_and_floor(self.stub, self.health, username, GRAPH, question)
        if measured:
            self.search_ms.append(took)
            self.health_ms.append(check)


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50_ms": round(statistics.median(ordered), 3),
        "p95_ms": round(percentile(ordered, 95), 3),
    }


def ratio_interval(base: list[float], tree: list[float], draws: int = 2000) -> tuple[float, float]:
    """A bootstrap 95 % interval of p50(tree) ÷ p50(base), resampling the paired calls."""
    rng = random.Random(31)
    n = len(base)
    ratios = []
    for _ in range(draws):
        picks = [rng.randrange(n) for _ in range(n)]
        ratios.append(
            statistics.median(tree[i] for i in picks) / statistics.median(base[i] for i in picks)
        )
    ratios.sort()
    return round(ratios[int(0.025 * draws)], 3), round(ratios[int(0.975 * draws)], 3)


async def run(args: argparse.Namespace, base: BenchServer, tree: BenchServer) -> dict[str, Any]:
    conversations = load(args.data, args.limit_conversations)
    sides = [Side("base", base), Side("tree", tree)]
    await asyncio.gather(*(side.store(conversations) for side in sides))
    asked = [(c.sample_id, q.text) for c in conversations for q in c.questions]
    for username, question in asked[:5]:  # warm-up, unmeasured
        for side in sides:
            await side.search(username, question, measured=False)
    for r in range(args.rounds):
        for i, (username, question) in enumerate(asked):
            pair = sides if (i + r) % 2 == 0 else sides[::-1]
            for side in pair:
                await side.search(username, question, measured=True)
    for side in sides:
        await side.channel.close()
    b, t = sides
    low, high = ratio_interval(b.search_ms, t.search_ms)
    return {
        "calls": len(b.search_ms),
        "base": {"search": summary(b.search_ms), "health": summary(b.health_ms)},
        "tree": {"search": summary(t.search_ms), "health": summary(t.health_ms)},
        "ratio_p50": round(statistics.median(t.search_ms) / statistics.median(b.search_ms), 3),
        "ratio_p50_95ci": [low, high],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base", required=True, help="git revision of the base server")
    p.add_argument("--data", type=Path, default=DEFAULT_DATA)
    p.add_argument("--limit-conversations", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--server-arg", action="append", default=[], help="for both servers")
    p.add_argument("--json-out", type=Path, default=Path("bench/results/search_ab.json"))
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="search-ab-") as tmp:
        package = revision_server(args.base, Path(tmp))
        env = {**os.environ, "PYTHONPATH": str(package)}
        if not imported_from(env).startswith(str(package)):
            raise SystemExit(f"the base server would not import from {package}")
        with (
            BenchServer(args.server_arg, env=env) as base,
            BenchServer(args.server_arg) as tree,
        ):
            result = asyncio.run(run(args, base, tree))
    result["args"] = {k: str(v) for k, v in vars(args).items()}
    write_report(args.json_out, result)
    print(
        f"SearchFacts p50: base {result['base']['search']['p50_ms']} ms, tree "
        f"{result['tree']['search']['p50_ms']} ms, tree ÷ base {result['ratio_p50']} "
        f"(95 % {result['ratio_p50_95ci'][0]}–{result['ratio_p50_95ci'][1]}); health p50 "
        f"{result['base']['health']['p50_ms']} / {result['tree']['health']['p50_ms']} ms"
    )


if __name__ == "__main__":
    main()
