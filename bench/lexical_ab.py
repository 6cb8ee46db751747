"""The lexical (idf) statement of another revision against the working tree's, on one database,
alternating call by call, with a check that both return the same hits and coverages.

    .venv/bin/python bench/lexical_ab.py [--base HEAD] [--sizes 1000,10000,100000] \
        [--many-scopes 1000] [--many-facts 100] [--queries 30]

The base's `store/facts/_reads.py` is read with `git show BASE:…` and loaded beside the working
tree's; both run their `lexical` through the same `PostgresFactStore` and pool. The data is
lexical_plan's (scale_curve's base texts plus "ticket k", COPY-seeded into a fresh embedded
PostgreSQL with every migration), the questions recall_texts'. Calls alternate which side goes
first. "Same" compares (id, coverage to 9 places) lists, or the same sets where only the order
of equal coverages differs (the seed gives every version the same recorded_at).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import asyncpg
from lexical_plan import GRAPH, seed
from recall_texts import questions

import memory_server.store.facts._reads as current
from memory_server.memory.identity import Scope
from memory_server.memory.ports import AsOf
from memory_server.store.embedded import EmbeddedPostgres
from memory_server.store.facts import PostgresFactStore
from memory_server.store.schema import apply_migrations

READS = "server/memory_server/store/facts/_reads.py"


def load_base(revision: str, into: Path) -> ModuleType:
    source = subprocess.run(
        ["git", "show", f"{revision}:{READS}"], check=True, capture_output=True, text=True
    ).stdout
    path = into / "base_reads.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("memory_server.store.facts._base_reads", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def same(a: list[tuple[str, float]], b: list[tuple[str, float]]) -> bool:
    left = [(i, round(c, 9)) for i, c in a]
    right = [(i, round(c, 9)) for i, c in b]
    return left == right or sorted(left) == sorted(right)


async def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    sizes = [int(s) for s in args.sizes.split(",") if s]
    rows = []
    with tempfile.TemporaryDirectory(prefix="lexical-ab-") as tmp:
        base = load_base(args.base, Path(tmp))
        sides = {"base": base.FactReads.lexical, "tree": current.FactReads.lexical}
        async with EmbeddedPostgres(Path(tmp) / "pg") as embedded:
            pool = await asyncpg.create_pool(embedded.dsn, min_size=1, max_size=2)
            assert pool is not None
            async with pool.acquire() as conn:
                await apply_migrations(conn)
                groups: list[tuple[str, str]] = []
                k = 0
                for size in sizes:
                    k = await seed(conn, [f"one-{size}"], size, k)
                    groups.append((f"1 × {size:,}", f"one-{size}"))
                if args.many_scopes:
                    users = [f"many-{i}" for i in range(args.many_scopes)]
                    k = await seed(conn, users, args.many_facts, k)
                    groups.append((f"{args.many_scopes:,} × {args.many_facts} (one)", users[0]))
                await conn.execute("ANALYZE")
            print(f"seeded {k:,} fact versions", flush=True)
            store = PostgresFactStore(pool)
            qs = questions(64)
            for label, user in groups:
                scope = Scope(user, GRAPH)
                times: dict[str, list[float]] = {"base": [], "tree": []}
                agree = 0
                for i in range(args.queries + 4):
                    answers = {}
                    order = ("base", "tree") if i % 2 else ("tree", "base")
                    for side in order:
                        began = time.perf_counter()
                        answers[side] = await sides[side](store, scope, qs[i % len(qs)], 50, AsOf())
                        if i >= 4:  # past the warm-up (and asyncpg's generic-plan switch)
                            times[side].append((time.perf_counter() - began) * 1000)
                    agree += i >= 4 and same(answers["base"], answers["tree"])
                row = {
                    "scope": label,
                    "base_p50_ms": round(statistics.median(times["base"]), 2),
                    "tree_p50_ms": round(statistics.median(times["tree"]), 2),
                    "same": f"{agree}/{args.queries}",
                }
                row["tree_vs_base"] = round(row["tree_p50_ms"] / row["base_p50_ms"], 2)
                print(row, flush=True)
                rows.append(row)
            await pool.close()
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--base", default="HEAD")
    p.add_argument("--sizes", default="1000,10000,100000")
    p.add_argument("--many-scopes", type=int, default=1000)
    p.add_argument("--many-facts", type=int, default=100)
    p.add_argument("--queries", type=int, default=30)
    args = p.parse_args()
    rows = asyncio.run(run(args))
    print("\n| scope | base p50 ms | tree p50 ms | tree ÷ base | same answers |")
    print("|---|---:|---:|---:|---|")
    for r in rows:
        print(
            f"| {r['scope']} | {r['base_p50_ms']} | {r['tree_p50_ms']} | {r['tree_vs_base']} "
            f"| {r['same']} |"
        )


if __name__ == "__main__":
    main()
