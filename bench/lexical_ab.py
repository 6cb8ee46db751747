"""The lexical (idf) statement of another revision against the working tree's, on one database,
alternating call by call, with a check that both return the same hits and coverages.

    .venv/bin/python bench/lexical_ab.py [--base HEAD] [--sizes 1000,10000,100000] \
        [--many-scopes 1000] [--many-facts 100] [--queries 30]

The base's statement is what its `memory_server.store.facts.LEXICAL_STATEMENT` says: its
`server/` is taken with `git archive BASE` into a temporary directory and imported there in a
child process (a revision from before that name existed cannot be a base). Both statements
run with the working tree's `lexical_arguments` on the same pool. The data is lexical_plan's
(scale_curve's base texts plus "ticket k", COPY-seeded into a fresh embedded PostgreSQL with
every migration), the questions recall_texts'. Calls alternate which side goes first. "Same"
compares (id, coverage to 9 places) lists, or the same sets where only the order of equal
coverages differs (the seed gives every version the same recorded_at).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import asyncpg
from lexical_plan import GRAPH, seed
from recall_texts import questions
from reporting import markdown_table
from serverproc import revision_server

from memory_server.memory.identity import Scope
from memory_server.memory.ports import AsOf
from memory_server.store.embedded import EmbeddedPostgres
from memory_server.store.facts import LEXICAL_STATEMENT, lexical_arguments
from memory_server.store.schema import apply_migrations

_SHOW = """import json, memory_server.store.facts as facts
print(json.dumps({"file": facts.__file__, "statement": facts.LEXICAL_STATEMENT}))"""


def base_statement(revision: str, into: Path) -> str:
    """LEXICAL_STATEMENT as the revision's own server package says it."""
    env = {**os.environ, "PYTHONPATH": str(revision_server(revision, into))}
    shown = subprocess.run([sys.executable, "-c", _SHOW], env=env, capture_output=True, text=True)
    if shown.returncode != 0:
        last = (shown.stderr.strip().splitlines() or ["?"])[-1]
        raise SystemExit(f"{revision}: no memory_server.store.facts.LEXICAL_STATEMENT ({last})")
    found = json.loads(shown.stdout)
    if not Path(found["file"]).is_relative_to(into):
        raise RuntimeError(f"imported {found['file']}, not the revision's copy in {into}")
    return str(found["statement"])


def same(a: list[tuple[str, float]], b: list[tuple[str, float]]) -> bool:
    left = [(i, round(c, 9)) for i, c in a]
    right = [(i, round(c, 9)) for i, c in b]
    return left == right or sorted(left) == sorted(right)


async def seed_groups(pool: asyncpg.Pool, args: argparse.Namespace) -> list[tuple[str, str]]:
    """Every migration, then a scope of each size and the many small scopes: (label, user)."""
    sizes = [int(s) for s in args.sizes.split(",") if s]
    groups: list[tuple[str, str]] = []
    async with pool.acquire() as conn:
        await apply_migrations(conn)
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
    return groups


async def compare(
    pool: asyncpg.Pool, statements: dict[str, str], label: str, user: str, queries: int
) -> dict[str, Any]:
    """Both statements on one scope, alternating which goes first; the first 4 calls warm up
    (and pass asyncpg's switch to a generic plan)."""
    scope = Scope(user, GRAPH)
    qs = questions(64)
    times: dict[str, list[float]] = {side: [] for side in statements}
    agree = 0
    for i in range(queries + 4):
        answers: dict[str, list[tuple[str, float]]] = {}
        order = ("base", "tree") if i % 2 else ("tree", "base")
        for side in order:
            arguments = lexical_arguments(scope, qs[i % len(qs)], 50, AsOf())
            began = time.perf_counter()
            rows = await pool.fetch(statements[side], *arguments)
            if i >= 4:
                times[side].append((time.perf_counter() - began) * 1000)
            answers[side] = [(str(r["id"]), float(r["coverage"])) for r in rows]
        agree += i >= 4 and same(answers["base"], answers["tree"])
    base_ms, tree_ms = statistics.median(times["base"]), statistics.median(times["tree"])
    return {
        "scope": label,
        "base_p50_ms": round(base_ms, 2),
        "tree_p50_ms": round(tree_ms, 2),
        "same": f"{agree}/{queries}",
        "tree_vs_base": round(tree_ms / base_ms, 2),
    }


async def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="lexical-ab-") as tmp:
        base = Path(tmp) / "base"
        base.mkdir()
        statements = {"base": base_statement(args.base, base), "tree": LEXICAL_STATEMENT}
        async with EmbeddedPostgres(Path(tmp) / "pg") as embedded:
            pool = await asyncpg.create_pool(embedded.dsn, min_size=1, max_size=2)
            assert pool is not None
            try:
                for label, user in await seed_groups(pool, args):
                    rows.append(await compare(pool, statements, label, user, args.queries))
                    print(rows[-1], flush=True)
            finally:
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
    columns = ("scope", "base p50 ms", "tree p50 ms", "tree ÷ base", "same answers")
    keys = ("scope", "base_p50_ms", "tree_p50_ms", "tree_vs_base", "same")
    print("\n" + markdown_table(columns, [[r[k] for k in keys] for r in rows]))


if __name__ == "__main__":
    main()
