"""Many scopes: SearchFacts on one 100-fact scope of a database holding 100 scopes against the
same scope in one holding 10,000 (issue 31, item 5), calls alternating between the two, with
each server's health check as its floor.

    .venv/bin/python bench/many_scopes.py [--small 100] [--large 10000] [--facts 100] \
        [--sampled 20] [--calls 15] [--json-out bench/results/many_scopes.json]

1. **Servers**: two `serverproc.BenchServer`s on their embedded defaults (exact vector search:
   the scope's btree), each with its own PostgreSQL. One `AddFact` through the RPC creates
   each one's tables.
2. **Seed** by bulk COPY (scale_curve's `Seeder`: the rows the store and the outbox write,
   `scopes`, `facts`, `fact_versions` whose lexemes and scope lexicon PostgreSQL makes, and
   `memory_vectors`, each vector a mix of two embedded base texts plus noise, from one seeded
   generator): both get the same `--small` scopes of `--facts` facts, row for row; the second
   then grows to `--large` scopes, 1,000 at a time. ANALYZE after each step.
3. **Measure**: `--sampled` of the shared scopes, spread over them; for each, `--calls`
   rounds (after 3 unmeasured) of SearchFacts (top 10, threshold 0, recall_texts' questions,
   one call in flight) on the small server, then on the large one, then each one's health
   check (`Check`, no database): a machine that slows down slows both sides alike. Per scope
   the p50 of each; reported, the median over the scopes, and the ratio large ÷ small
   (target ≤ 1.2×).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import grpc
import numpy as np
from grpc_health.v1 import health_pb2_grpc as health_grpc
from recall_texts import questions
from reporting import write_report
from rpc import Stored, search_and_floor, wait_indexed
from scale_curve import GRAPH, Seeder, base_texts, init_connection
from serverproc import BenchServer, serving

from memory_client.v1 import memory_pb2 as pb
from memory_client.v1 import memory_pb2_grpc as pb_grpc
from memory_server.embedding import MiniLMBackend


@dataclass
class Side:
    """One server of the A/B: its stubs and, per sampled scope, its calls' times (ms)."""

    label: str
    stub: pb_grpc.MemoryServiceStub
    health: health_grpc.HealthStub
    search: dict[str, list[float]] = field(default_factory=dict)
    floor: dict[str, list[float]] = field(default_factory=dict)

    async def call(self, user: str, question: str, measured: bool) -> None:
        took, check = await search_and_floor(self.stub, self.health, user, GRAPH, question)
        if measured:
            self.search.setdefault(user, []).append(took)
            self.floor.setdefault(user, []).append(check)

    def summary(self) -> dict[str, Any]:
        return {
            "search_facts_p50_ms": round(
                statistics.median(statistics.median(v) for v in self.search.values()), 3
            ),
            "health_p50_ms": round(
                statistics.median(statistics.median(v) for v in self.floor.values()), 3
            ),
        }


async def prepared(server: BenchServer, label: str) -> tuple[Side, grpc.aio.Channel]:
    channel = grpc.aio.insecure_channel(server.address)
    side = Side(label, pb_grpc.MemoryServiceStub(channel), health_grpc.HealthStub(channel))
    warm = pb.AddFactRequest(username="many-warm", graphname=GRAPH, text="warms the tables up")
    added = await side.stub.AddFact(warm, timeout=60)
    await wait_indexed(
        side.stub, [Stored(warm.username, GRAPH, warm.text, added.fact.fact_id)], 120
    )
    return side, channel


async def seeded(
    server: BenchServer, texts: list[str], embeddings: np.ndarray, scopes: int, facts: int
) -> int:
    """Seeds `scopes` scopes (the first `small` the same on both servers); their row count."""
    pool = await asyncpg.create_pool(server.dsn(), min_size=1, max_size=2, init=init_connection)
    assert pool is not None
    seeder = Seeder(pool, texts, embeddings)
    for first in range(0, scopes, 1000):
        batch = [f"many-{i}" for i in range(first, min(scopes, first + 1000))]
        seconds = await seeder.seed(batch, facts)
        print(f"{server.address}: {first + len(batch):,} scopes ({seconds:.1f} s)", flush=True)
    rows = int(await pool.fetchval("SELECT count(*) FROM fact_versions"))
    await pool.close()
    return rows


async def run(args: argparse.Namespace, small: BenchServer, large: BenchServer) -> dict[str, Any]:
    qs = questions(64)
    backend = MiniLMBackend()
    texts = base_texts(args.base_texts)
    embeddings = np.array(
        [v for i in range(0, len(texts), 32) for v in backend.embed_batch(texts[i : i + 32])],
        dtype=np.float32,
    )
    backend.close()
    a, a_channel = await prepared(small, f"{args.small:,} scopes")
    b, b_channel = await prepared(large, f"{args.large:,} scopes")
    rows_a = await seeded(small, texts, embeddings, args.small, args.facts)
    rows_b = await seeded(large, texts, embeddings, args.large, args.facts)
    users = [f"many-{i}" for i in range(args.small)]
    sampled = users[:: max(1, len(users) // args.sampled)][: args.sampled]
    for user in sampled:
        for i in range(args.calls + 3):
            for side in (a, b):
                await side.call(user, qs[i % len(qs)], measured=i >= 3)
    await a_channel.close()
    await b_channel.close()
    out_a, out_b = a.summary(), b.summary()
    out_a.update({"label": a.label, "fact_versions": rows_a})
    out_b.update({"label": b.label, "fact_versions": rows_b})
    print(out_a, out_b, sep="\n", flush=True)
    return {
        "small": out_a,
        "large": out_b,
        "scopes_measured": len(sampled),
        "ratio_search": round(out_b["search_facts_p50_ms"] / out_a["search_facts_p50_ms"], 3),
        "ratio_floor": round(out_b["health_p50_ms"] / out_a["health_p50_ms"], 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", type=int, default=100)
    parser.add_argument("--large", type=int, default=10_000)
    parser.add_argument("--facts", type=int, default=100)
    parser.add_argument("--sampled", type=int, default=20)
    parser.add_argument("--calls", type=int, default=15)
    parser.add_argument("--base-texts", type=int, default=1500)
    parser.add_argument("--server-arg", action="append", default=[])
    parser.add_argument("--json-out", type=Path, default=Path("bench/results/many_scopes.json"))
    args = parser.parse_args()
    with serving(args.server_arg) as small, serving(args.server_arg) as large:
        result = asyncio.run(run(args, small, large))
    result["args"] = {k: str(v) for k, v in vars(args).items()}
    result["server_problems"] = [*small.problems, *large.problems]
    write_report(args.json_out, result)
    print(
        f"SearchFacts p50 on one of {args.large:,} scopes ÷ one of {args.small:,}: "
        f"{result['ratio_search']}× (target ≤ 1.2×); health check {result['ratio_floor']}×"
    )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
