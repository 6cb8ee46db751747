"""The lexical (idf) query's plan and time before and after migration 0006 (which drops the GIN
index on lexemes, so the scope's btree confines the scan), and with the alternative of a GIN
index on (scope_id, lexemes) with btree_gin, on one database in one run.

    .venv/bin/python bench/lexical_plan.py [--sizes 1000,10000,100000] [--many-scopes 1000] \
        [--many-facts 100] [--queries 50] [--json-out bench/results/lexical_plan.json]

A fresh embedded PostgreSQL in a temporary directory gets migrations up to 0005; scopes of
`--sizes` facts and `--many-scopes` scopes of `--many-facts` are seeded by COPY with
scale_curve's texts (its base texts plus `ticket k`). For each scope size: the scanning
statement (`store.facts.LEXICAL_STATEMENT`, top 50, what recall asks for; since migration 0012
the store sends it only for a search as of a past point) timed over `--queries` of
recall_texts' questions, and the plan of one of them (EXPLAIN (ANALYZE, BUFFERS) of the very
statement the store sends, `store.facts.LEXICAL_STATEMENT`). Then migration 0006 is applied,
ANALYZE, and the same again; then `CREATE EXTENSION btree_gin` and a GIN index on (scope_id,
lexemes), and the same again.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
from latency import percentile
from recall_texts import questions
from reporting import markdown_table, write_report
from scale_curve import base_texts

from memory_server.memory.identity import Scope, scope_hash
from memory_server.memory.ports import AsOf
from memory_server.store.embedded import EmbeddedPostgres
from memory_server.store.facts import LEXICAL_STATEMENT, lexical_arguments
from memory_server.store.schema import apply_migrations, bundled_migrations

GRAPH = "Plan"


async def seed(conn: asyncpg.Connection, users: list[str], per_scope: int, k0: int) -> int:
    texts = base_texts(1500)
    now = datetime.now(UTC)
    ids = await conn.fetch(
        """INSERT INTO scopes (username, graphname, scope_hash)
           SELECT * FROM unnest($1::text[], $2::text[], $3::text[]) RETURNING id""",
        users,
        [GRAPH] * len(users),
        [scope_hash(u, GRAPH) for u in users],
    )
    k = k0
    facts: list[tuple[Any, ...]] = []
    versions: list[tuple[Any, ...]] = []
    for row in ids:
        for _ in range(per_scope):
            fact_id = uuid.uuid4()
            facts.append((fact_id, row["id"], "other", now, now))
            text = f"{texts[k % len(texts)]} (ticket {k})"
            versions.append((uuid.uuid4(), fact_id, row["id"], text, "other", now, now))
            k += 1
    await conn.copy_records_to_table(
        "facts", records=facts, columns=["id", "scope_id", "kind", "created_at", "last_seen_at"]
    )
    await conn.copy_records_to_table(
        "fact_versions",
        records=versions,
        columns=["id", "fact_id", "scope_id", "text", "kind", "valid_from", "recorded_at"],
    )
    return k


async def measure(
    pool: asyncpg.Pool, groups: list[tuple[str, str]], queries: int
) -> list[dict[str, Any]]:
    qs = questions(64)
    out = []
    for label, user in groups:
        scope = Scope(user, GRAPH)
        for q in qs[:5]:  # warm-up (and past asyncpg's generic-plan switch)
            await pool.fetch(LEXICAL_STATEMENT, *lexical_arguments(scope, q, 50, AsOf()))
        ms = []
        for i in range(queries):
            began = time.perf_counter()
            await pool.fetch(
                LEXICAL_STATEMENT, *lexical_arguments(scope, qs[i % len(qs)], 50, AsOf())
            )
            ms.append((time.perf_counter() - began) * 1000)
        plan = await pool.fetch(
            "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + LEXICAL_STATEMENT,
            *lexical_arguments(scope, qs[0], 50, AsOf()),
        )
        row = {
            "scope": label,
            "p50_ms": round(statistics.median(ms), 2),
            "p99_ms": round(percentile(sorted(ms), 99), 2),
            "plan": "\n".join(r[0] for r in plan),
        }
        print(f"{label}: p50 {row['p50_ms']} ms, p99 {row['p99_ms']} ms", flush=True)
        out.append(row)
    return out


async def run(args: argparse.Namespace) -> dict[str, Any]:
    sizes = [int(s) for s in args.sizes.split(",") if s]
    with tempfile.TemporaryDirectory(prefix="lexical-plan-") as tmp:
        async with EmbeddedPostgres(Path(tmp)) as embedded:
            pool = await asyncpg.create_pool(embedded.dsn, min_size=1, max_size=2)
            assert pool is not None
            migrations = bundled_migrations()
            async with pool.acquire() as conn:
                await apply_migrations(conn, [m for m in migrations if m.version < 6])
                groups: list[tuple[str, str]] = []
                k = 0
                for size in sizes:
                    user = f"one-{size}"
                    k = await seed(conn, [user], size, k)
                    groups.append((f"1 × {size:,}", user))
                if args.many_scopes:
                    users = [f"many-{i}" for i in range(args.many_scopes)]
                    k = await seed(conn, users, args.many_facts, k)
                    groups.append(
                        (f"{args.many_scopes:,} × {args.many_facts} (one of them)", users[0])
                    )
                await conn.execute("ANALYZE scopes, facts, fact_versions")
            print(f"seeded {k:,} fact versions", flush=True)
            print("before 0006 (GIN on lexemes alone):", flush=True)
            before = await measure(pool, groups, args.queries)
            await pool.expire_connections()
            async with pool.acquire() as conn:
                began = time.perf_counter()
                await apply_migrations(conn, migrations)
                index_s = time.perf_counter() - began
                await conn.execute("ANALYZE fact_versions")
            print(f"0006 applied in {index_s:.1f} s; after (no full-text index, scope btree):")
            after = await measure(pool, groups, args.queries)
            # The alternative measured against it: one GIN index holding the scope id too.
            await pool.execute("CREATE EXTENSION IF NOT EXISTS btree_gin")
            await pool.execute(
                "CREATE INDEX lexemes_by_scope ON fact_versions USING gin (scope_id, lexemes)"
            )
            await pool.execute("ANALYZE fact_versions")
            await pool.expire_connections()
            print("alternative: GIN on (scope_id, lexemes) with btree_gin:")
            btree_gin = await measure(pool, groups, args.queries)
            await pool.close()
    return {
        "rows": k,
        "migration_s": round(index_s, 1),
        "before": before,
        "after": after,
        "btree_gin": btree_gin,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--sizes", default="1000,10000,100000")
    p.add_argument("--many-scopes", type=int, default=1000)
    p.add_argument("--many-facts", type=int, default=100)
    p.add_argument("--queries", type=int, default=50)
    p.add_argument("--json-out", type=Path, default=Path("bench/results/lexical_plan.json"))
    args = p.parse_args()
    result = asyncio.run(run(args))
    write_report(args.json_out, result)
    columns = ("scope", "0005: GIN (lexemes)", "0006: scope btree", "btree_gin (scope_id, lexemes)")
    rows = [
        [b["scope"], b["p50_ms"], a["p50_ms"], g["p50_ms"]]
        for b, a, g in zip(result["before"], result["after"], result["btree_gin"], strict=True)
    ]
    print(markdown_table(columns, rows))


if __name__ == "__main__":
    main()
