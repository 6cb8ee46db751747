"""pgvector HNSW against the exact scan on scale_curve's vectors: recall@10 and p50 of the
scope's top-10 for each build (m, ef_construction) and each `hnsw.ef_search`.

    .venv/bin/python bench/hnsw_params.py [--builds 16:64,32:200] [--ef 100,200,400,800] \
        [--sizes 1000,10000,100000] [--many-scopes 1000] [--many-facts 100] [--questions 40]

A fresh embedded PostgreSQL with every migration and the vector table; scale_curve's Seeder
COPYs a scope of each size and `--many-scopes` of `--many-facts` (its vectors mix two of 1,500
embedded base texts plus noise). The exact top-10 of each of recall_texts' questions in the
two largest scopes comes first, with no index; then each build is made (maintenance_work_mem
1 GB) and queried with `hnsw.iterative_scan = strict_order` and `plan_cache_mode =
force_custom_plan`, the settings without which the scan returns too few rows of a scope or
a prepared statement falls back to the exact plan (bench/README.md, scale curve).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import asyncpg
import numpy as np
from recall_texts import questions
from reporting import markdown_table
from scale_curve import GRAPH, Seeder, base_texts, init_connection

from memory_server.embedding import MiniLMBackend
from memory_server.index.pgvector import HNSW_SCAN, PgVectorIndex
from memory_server.memory.identity import scope_hash
from memory_server.store.embedded import EmbeddedPostgres
from memory_server.store.schema import apply_migrations

TOP = """SELECT version_id FROM memory_vectors WHERE scope_hash = $1
         ORDER BY embedding <=> $2::vector LIMIT 10"""


async def timed_top(
    conn: asyncpg.Connection, user: str, qv: list[list[float]]
) -> tuple[list[list[Any]], float]:
    h = scope_hash(user, GRAPH)
    found: list[list[Any]] = []
    ms: list[float] = []
    for q in qv:
        began = time.perf_counter()
        found.append([r[0] for r in await conn.fetch(TOP, h, q)])
        ms.append((time.perf_counter() - began) * 1000)
    return found, statistics.median(ms)


async def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    backend = MiniLMBackend()
    texts = base_texts(1500)
    embeddings = np.array(backend.embed_batch(texts), dtype=np.float64)
    qv = backend.embed_batch(questions(64))[: args.questions]
    sizes = [int(s) for s in args.sizes.split(",") if s]
    measured = [f"one-{s}" for s in sorted(sizes)[-2:]]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="hnsw-params-") as tmp:
        async with EmbeddedPostgres(Path(tmp)) as embedded:
            setup = await asyncpg.create_pool(embedded.dsn, min_size=1, max_size=1)
            assert setup is not None
            async with setup.acquire() as conn:
                await apply_migrations(conn)
            await PgVectorIndex(setup, backend.dimension).count("none")  # makes the table
            await setup.close()
            pool = await asyncpg.create_pool(
                embedded.dsn, min_size=1, max_size=2, init=init_connection
            )
            assert pool is not None
            seeder = Seeder(pool, texts, embeddings)
            for size in sizes:
                await seeder.seed([f"one-{size}"], size)
            if args.many_scopes:
                await seeder.seed([f"many-{i}" for i in range(args.many_scopes)], args.many_facts)
            async with pool.acquire() as conn:
                exact = {}
                for user in measured:
                    exact[user], p50 = await timed_top(conn, user, qv)
                    rows.append({"build": "exact", "scope": user, "p50_ms": round(p50, 2)})
                    print(rows[-1], flush=True)
                await conn.execute("SET maintenance_work_mem = '1GB'")
                for build in args.builds.split(","):
                    m, ef_construction = (int(x) for x in build.split(":"))
                    await conn.execute("DROP INDEX IF EXISTS memory_vectors_hnsw_probe")
                    began = time.perf_counter()
                    await conn.execute(
                        "CREATE INDEX memory_vectors_hnsw_probe ON memory_vectors USING hnsw "
                        f"(embedding vector_cosine_ops) WITH (m = {m}, "
                        f"ef_construction = {ef_construction})"
                    )
                    built_s = time.perf_counter() - began
                    for ef in (int(x) for x in args.ef.split(",")):
                        # The server's search settings, here for this whole session.
                        await conn.execute(HNSW_SCAN, str(ef), False)
                        for user in measured:
                            found, p50 = await timed_top(conn, user, qv)
                            shares = [
                                len(set(a) & set(e)) / max(1, len(e))
                                for a, e in zip(found, exact[user], strict=True)
                            ]
                            plan = await conn.fetchval(
                                "EXPLAIN (FORMAT JSON) " + TOP, scope_hash(user, GRAPH), qv[0]
                            )
                            rows.append(
                                {
                                    "build": f"m {m}, ef_construction {ef_construction}",
                                    "built_s": round(built_s, 1),
                                    "ef_search": ef,
                                    "scope": user,
                                    "recall_at_10": round(statistics.mean(shares), 3),
                                    "p50_ms": round(p50, 2),
                                    "hnsw_plan": "memory_vectors_hnsw_probe" in plan,
                                }
                            )
                            print(rows[-1], flush=True)
            await pool.close()
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--builds", default="16:64,32:200", help="m:ef_construction, comma-separated")
    p.add_argument("--ef", default="100,200,400,800")
    p.add_argument("--sizes", default="1000,10000,100000")
    p.add_argument("--many-scopes", type=int, default=1000)
    p.add_argument("--many-facts", type=int, default=100)
    p.add_argument("--questions", type=int, default=40)
    args = p.parse_args()
    rows = asyncio.run(run(args))
    columns = ("build", "built s", "ef_search", "scope", "recall@10", "p50 ms", "HNSW plan")
    keys = ("build", "built_s", "ef_search", "scope", "recall_at_10", "p50_ms", "hnsw_plan")
    print("\n" + markdown_table(columns, [[r.get(k) for k in keys] for r in rows]))


if __name__ == "__main__":
    main()
