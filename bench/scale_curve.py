"""Scale curve: SearchFacts p50/p99 at 1,000, 10,000 and 100,000 live facts in one scope and
at many scopes of 100 facts, exact search first, then with a pgvector HNSW index, and the HNSW
index's recall@10 (and @50, what recall asks the index for) against exact search.

    .venv/bin/python bench/scale_curve.py [--sizes 1000,10000,100000] [--many-scopes 1000] \
        [--many-facts 100] [--queries 200] [--json-out bench/results/scale_curve.json]

1. **Server**: `serverproc.BenchServer` with `--max-facts-per-scope` above the largest size
   and `--embedding-cache-size=0`: every pass asks the same questions, and with the cache on
   the later passes' SearchFacts held no embedding, the first's did (a new question always
   does); `--server-arg=--embedding-cache-size=2048` measures the cached case.
   One `AddFact` through the RPC creates the tables (the vector table is made on first use).
2. **Seed** by bulk COPY on the server's embedded PostgreSQL, the rows the store and the
   outbox would write: `scopes`, `facts`, `fact_versions` (whose `lexemes` column PostgreSQL
   generates) and `memory_vectors`. Embedding 200,000 texts with MiniLM would take this
   machine longer than the whole run, so `--base-texts` distinct texts (recall_texts'
   templates) are embedded with the server's own model, and fact k's vector is
   `normalize(e[a] + 0.5 e[b] + 0.2 g)` with a = k mod B, b = 7919 k mod B and g a seeded
   Gaussian, so that no two vectors coincide and neighbourhoods are as crowded as a real
   scope's; fact k's text is text a plus `ticket k`. Then ANALYZE.
3. **Search** through the real RPC: `SearchFacts(top_k=10, threshold=0)` with recall_texts'
   questions, one call in flight, `--queries` calls after 10 warm-up calls, per scope size.
   Beside it, in this process on the same database, the two statements SearchFacts runs
   (PgVectorIndex.search top-50 and the store's lexical top-50), timed alone.
4. **HNSW**: `CREATE INDEX memory_vectors_hnsw ... USING hnsw (embedding vector_cosine_ops)`
   and the same searches again (the server's statements, with whatever plan PostgreSQL
   picks: after five runs of a prepared statement, its generic plan), then recall@10/@50 of
   the HNSW scan (pgvector's HNSW_SCAN settings) against the exact top-k (index scans
   off), for every question in every scope size (10 scopes of the many), with the plans taken.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import struct
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import grpc
import numpy as np
from latency import ms_summary
from recall_texts import FACT_TEMPLATES, fill, questions
from reporting import write_report
from rpc import Stored, wait_indexed
from serverproc import BenchServer, serving

from memory_client.v1 import memory_pb2 as pb
from memory_client.v1 import memory_pb2_grpc as pb_grpc
from memory_server.embedding import MiniLMBackend
from memory_server.index.pgvector import HNSW_SCAN, Hnsw, PgVectorIndex
from memory_server.memory.identity import Scope, scope_hash
from memory_server.memory.ports import AsOf
from memory_server.memory.recall.search import CANDIDATES_PER_SIGNAL
from memory_server.store.facts import PostgresFactStore

GRAPH = "Scale"
# For the HNSW pass's recall: enough candidates for k 50, the scope filter applied during the
# scan, and a custom plan each time (after five runs a prepared statement gets PostgreSQL's
# generic plan, which for `scope_hash = $1` is the btree and an exact sort). The server's own
# searches set them too once the table has an HNSW index (index.pgvector, SCAN_WITH_HNSW).
HNSW = Hnsw()  # the server's `pgvector_hnsw` build and search (its HNSW_SCAN settings)


def base_texts(count: int) -> list[str]:
    rng = random.Random("scale-base-texts")
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < count:
        text = fill(rng.choice(FACT_TEMPLATES), rng)
        if text not in seen:
            seen.add(text)
            out.append(text)
    return out


def encode_vector(vector: Sequence[float]) -> bytes:
    """pgvector's binary form: dimension, unused, float4s (big-endian)."""
    return struct.pack(f">HH{len(vector)}f", len(vector), 0, *vector)


def decode_vector(data: bytes) -> list[float]:
    dim = struct.unpack_from(">H", data)[0]
    return list(struct.unpack_from(f">{dim}f", data, 4))


async def init_connection(conn: asyncpg.Connection) -> None:
    await conn.set_type_codec(
        "vector", schema="public", encoder=encode_vector, decoder=decode_vector, format="binary"
    )


class Seeder:
    def __init__(self, pool: asyncpg.Pool, texts: list[str], embeddings: np.ndarray) -> None:
        self.pool = pool
        self.texts = texts
        self.embeddings = embeddings
        self.next_k = 0
        self.rng = np.random.default_rng(17)

    async def seed(self, users: list[str], per_scope: int) -> float:
        """COPY `per_scope` facts into each new scope; answers the seconds it took."""
        began = time.perf_counter()
        now = datetime.now(UTC)
        b = len(self.texts)
        async with self.pool.acquire() as conn, conn.transaction():
            scope_rows = [(u, GRAPH, scope_hash(u, GRAPH)) for u in users]
            ids = await conn.fetch(
                """INSERT INTO scopes (username, graphname, scope_hash)
                   SELECT * FROM unnest($1::text[], $2::text[], $3::text[])
                   RETURNING id, scope_hash""",
                [r[0] for r in scope_rows],
                [r[1] for r in scope_rows],
                [r[2] for r in scope_rows],
            )
            for chunk_start in range(0, len(ids), max(1, 20_000 // per_scope)):
                chunk = ids[chunk_start : chunk_start + max(1, 20_000 // per_scope)]
                facts: list[tuple[Any, ...]] = []
                versions: list[tuple[Any, ...]] = []
                vectors: list[tuple[Any, ...]] = []
                n = len(chunk) * per_scope
                ks = np.arange(self.next_k, self.next_k + n)
                self.next_k += n
                mixed = (
                    self.embeddings[ks % b]
                    + 0.5 * self.embeddings[(ks * 7919) % b]
                    + 0.2 * self.rng.standard_normal((n, self.embeddings.shape[1])) / 19.6
                )
                mixed /= np.linalg.norm(mixed, axis=1, keepdims=True)
                row = 0
                for scope in chunk:
                    for _ in range(per_scope):
                        k = int(ks[row])
                        fact_id, version_id = uuid.uuid4(), uuid.uuid4()
                        text = f"{self.texts[k % b]} (ticket {k})"
                        facts.append((fact_id, scope["id"], "other", now, now))
                        versions.append((version_id, fact_id, scope["id"], text, "other", now, now))
                        vectors.append(
                            (version_id, scope["scope_hash"], now, now, mixed[row].tolist())
                        )
                        row += 1
                await conn.copy_records_to_table(
                    "facts",
                    records=facts,
                    columns=["id", "scope_id", "kind", "created_at", "last_seen_at"],
                )
                await conn.copy_records_to_table(
                    "fact_versions",
                    records=versions,
                    columns=[
                        "id",
                        "fact_id",
                        "scope_id",
                        "text",
                        "kind",
                        "valid_from",
                        "recorded_at",
                    ],  # fmt: skip
                )
                await conn.copy_records_to_table(
                    "memory_vectors",
                    records=vectors,
                    columns=["version_id", "scope_hash", "valid_from", "recorded_at", "embedding"],
                )
        async with self.pool.acquire() as conn:
            await conn.execute("ANALYZE scopes, facts, fact_versions, memory_vectors")
        return time.perf_counter() - began


async def timed(
    calls: int, step: Callable[[int], Awaitable[None]], warmup: int
) -> dict[str, float | None]:
    """`ms_summary` of `calls` steps, after `warmup` unmeasured ones."""
    for i in range(warmup):
        await step(i)
    out = []
    for i in range(calls):
        began = time.perf_counter()
        await step(i)
        out.append((time.perf_counter() - began) * 1000)
    return ms_summary(out)


async def measure(
    stub: pb_grpc.MemoryServiceStub,
    store: PostgresFactStore,
    index: PgVectorIndex,
    user: str,
    qs: list[str],
    qvecs: list[list[float]],
    calls: int,
) -> dict[str, Any]:
    scope = Scope(user, GRAPH)

    async def rpc(i: int) -> None:
        request = pb.SearchFactsRequest(
            username=user, graphname=GRAPH, query=qs[i % len(qs)], top_k=10, threshold=0.0
        )
        reply = await stub.SearchFacts(request, timeout=60)
        assert len(reply.results) == 10, len(reply.results)

    async def vector(i: int) -> None:
        hits = await index.search(
            scope.scope_hash, qvecs[i % len(qs)], CANDIDATES_PER_SIGNAL, AsOf()
        )
        assert hits

    async def lexical(i: int) -> None:
        await store.lexical(scope, qs[i % len(qs)], CANDIDATES_PER_SIGNAL, AsOf())

    return {
        "search_facts": await timed(calls, rpc, 10),
        "vector_top50": await timed(max(50, calls // 2), vector, 5),
        "lexical_top50": await timed(max(50, calls // 2), lexical, 5),
    }


async def ann_recall(
    pool: asyncpg.Pool, users: list[str], qvecs: list[list[float]], k: int
) -> dict[str, float]:
    """Mean |HNSW top-k ∩ exact top-k| / k over questions × users (users sampled)."""
    sql = """SELECT version_id FROM memory_vectors WHERE scope_hash = $1
             ORDER BY embedding <=> $2::vector LIMIT $3"""
    shares = []
    plans: dict[str, int] = {}
    async with pool.acquire() as conn:
        await conn.execute(HNSW_SCAN, str(HNSW.ef_search), False)  # for this session
        for user in users:
            h = scope_hash(user, GRAPH)
            for qv in qvecs:
                async with conn.transaction():
                    await conn.execute(
                        "SET LOCAL enable_indexscan = off; SET LOCAL enable_bitmapscan = on"
                    )
                    exact = {r[0] for r in await conn.fetch(sql, h, qv, k)}
                approx = {r[0] for r in await conn.fetch(sql, h, qv, k)}
                plan = await conn.fetchval("EXPLAIN (FORMAT JSON) " + sql, h, qv, k)
                node = json.loads(plan)[0]["Plan"]
                while "Plans" in node and node.get("Index Name") is None:
                    node = node["Plans"][0]
                name = str(node.get("Index Name", node["Node Type"]))
                plans[name] = plans.get(name, 0) + 1
                shares.append(len(exact & approx) / max(1, len(exact)))
    return {f"recall_at_{k}": round(statistics.mean(shares), 4), "plans": plans}  # type: ignore[dict-item]


def print_table(rows: list[dict[str, Any]]) -> None:
    head = (
        "| index | scope | facts in scope | rows in table | SearchFacts p50 | p95 | p99 "
        "| vector top-50 p50 | lexical top-50 p50 | recall@10 | recall@50 |"
    )
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for r in rows:
        m = r["metrics"]
        print(
            f"| {r['index']} | {r['label']} | {r['facts']:,} | {r['table_rows']:,} "
            f"| {m['search_facts']['p50_ms']} | {m['search_facts']['p95_ms']} "
            f"| {m['search_facts']['p99_ms']} | {m['vector_top50']['p50_ms']} "
            f"| {m['lexical_top50']['p50_ms']} | {r.get('recall_at_10', '')} "
            f"| {r.get('recall_at_50', '')} |"
        )


async def run(args: argparse.Namespace, server: BenchServer) -> dict[str, Any]:
    dsn = server.dsn()
    channel = grpc.aio.insecure_channel(server.address)
    stub = pb_grpc.MemoryServiceStub(channel)
    qs = questions(64)
    backend = MiniLMBackend()
    began = time.perf_counter()
    texts = base_texts(args.base_texts)
    embeddings = np.array(
        [v for i in range(0, len(texts), 32) for v in backend.embed_batch(texts[i : i + 32])],
        dtype=np.float32,
    )
    qvecs = backend.embed_batch(qs)
    embed_s = time.perf_counter() - began
    print(f"embedded {len(texts)} base texts + {len(qs)} questions in {embed_s:.1f} s", flush=True)

    # The schema and the vector table, made by the server itself.
    warm = pb.AddFactRequest(username="scale-warm", graphname=GRAPH, text="warms the tables up")
    added = await stub.AddFact(warm, timeout=60)
    await wait_indexed(stub, [Stored(warm.username, GRAPH, warm.text, added.fact.fact_id)], 120)

    pool = await asyncpg.create_pool(dsn, min_size=2, max_size=4, init=init_connection)
    assert pool is not None
    # The exact pass first (a server that had made an HNSW index: dropped, built again later).
    await pool.execute("DROP INDEX IF EXISTS memory_vectors_hnsw")
    plain_pool = await asyncpg.create_pool(dsn, min_size=1, max_size=2)
    assert plain_pool is not None
    store = PostgresFactStore(plain_pool)
    # Started by its first search, as a server's is: the table is there, so it runs no DDL.
    index = PgVectorIndex(plain_pool, 384)
    seeder = Seeder(pool, texts, embeddings)
    groups: list[dict[str, Any]] = []
    for size in args.sizes:
        user = f"scale-one-{size}"
        seconds = await seeder.seed([user], size)
        print(f"seeded 1 scope × {size:,} facts in {seconds:.1f} s", flush=True)
        groups.append({"label": f"1 × {size:,}", "facts": size, "users": [user]})
    if args.many_scopes:
        users = [f"scale-many-{i}" for i in range(args.many_scopes)]
        seconds = await seeder.seed(users, args.many_facts)
        print(
            f"seeded {args.many_scopes:,} scopes × {args.many_facts} facts in {seconds:.1f} s",
            flush=True,
        )
        groups.append(
            {
                "label": f"{args.many_scopes:,} × {args.many_facts} (one of them)",
                "facts": args.many_facts,
                "users": users,
            }
        )
    table_rows = int(await plain_pool.fetchval("SELECT count(*) FROM memory_vectors"))

    rows: list[dict[str, Any]] = []

    async def measure_all(index_kind: str) -> None:
        for g in groups:
            # Many scopes: the calls go round the first 200 of them, as many users would.
            users = g["users"]
            metrics: dict[str, Any] = {}
            if len(users) == 1:
                metrics = await measure(stub, store, index, users[0], qs, qvecs, args.queries)
            else:
                per_user = max(1, args.queries // min(len(users), 20))
                samples: dict[str, list[dict[str, float]]] = {}
                for u in users[:: max(1, len(users) // 20)][:20]:
                    one = await measure(stub, store, index, u, qs, qvecs, per_user)
                    for key, value in one.items():
                        samples.setdefault(key, []).append(value)
                metrics = {
                    key: {s: round(statistics.median(v[s] for v in vs), 2) for s in vs[0]}
                    for key, vs in samples.items()
                }
            row = {
                "index": index_kind,
                "label": g["label"],
                "facts": g["facts"],
                "table_rows": table_rows,
                "metrics": metrics,
            }
            if index_kind != "exact (no ANN index)":
                sample = users[:: max(1, len(users) // 10)][:10]
                for k in (10, 50):
                    got = await ann_recall(pool, sample, qvecs, k)
                    row[f"recall_at_{k}"] = got[f"recall_at_{k}"]
                    row[f"plans_at_{k}"] = got["plans"]
            rows.append(row)
            print(json.dumps(row), flush=True)

    await measure_all("exact (no ANN index)")
    if args.hnsw:
        began = time.perf_counter()
        async with plain_pool.acquire() as conn:
            await conn.execute(f"SET maintenance_work_mem = '{args.maintenance_work_mem}'")
            await conn.execute(HNSW.create_sql())
            await conn.execute("ANALYZE memory_vectors")
        built_s = time.perf_counter() - began
        print(f"HNSW index built in {built_s:.1f} s over {table_rows:,} rows", flush=True)
        # The statement timed beside SearchFacts searches as the server does with the setting.
        index = PgVectorIndex(plain_pool, 384, HNSW)
        await measure_all(
            f"HNSW (m {HNSW.m}, ef_construction {HNSW.ef_construction}; "
            f"ef_search {HNSW.ef_search}, strict iterative scan)"
        )
    else:
        built_s = 0.0
    await pool.close()
    await plain_pool.close()
    await channel.close()
    return {"embed_s": embed_s, "hnsw_build_s": built_s, "table_rows": table_rows, "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--many-scopes", type=int, default=1000)
    parser.add_argument("--many-facts", type=int, default=100)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--base-texts", type=int, default=1500)
    parser.add_argument("--no-hnsw", dest="hnsw", action="store_false")
    parser.add_argument("--maintenance-work-mem", default="1GB")
    parser.add_argument("--server-arg", action="append", default=[])
    parser.add_argument("--json-out", type=Path, default=Path("bench/results/scale_curve.json"))
    args = parser.parse_args()
    args.sizes = [int(s) for s in args.sizes.split(",") if s]
    biggest = max([*args.sizes, args.many_facts]) + 10
    extra = [f"--max-facts-per-scope={biggest}", "--embedding-cache-size=0", *args.server_arg]
    with serving(extra) as server:
        result = asyncio.run(run(args, server))
    result["args"] = {k: v for k, v in vars(args).items() if k != "json_out"}
    result["args"]["json_out"] = str(args.json_out)
    result["server_problems"] = server.problems
    write_report(args.json_out, result)
    print_table(result["rows"])
    by = {
        (r["index"][:5], r["label"]): r["metrics"]["search_facts"]["p50_ms"] for r in result["rows"]
    }
    small, large = f"1 × {min(args.sizes):,}", f"1 × {max(args.sizes):,}"
    for kind in ("exact", "HNSW "):
        if (kind, small) in by and (kind, large) in by:
            print(
                f"{kind.strip()}: SearchFacts p50 at {large} ÷ at {small}: "
                f"{by[(kind, large)] / by[(kind, small)]:.2f}× (target ≤ 3×)"
            )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
