"""LoCoMo recall with semantic links on and off, and a sweep of the link settings.

    .venv/bin/python bench/locomo_links.py [--write T/M,...] [--read D/S,...]
                                           [--limit-conversations N]

Links are written when facts are indexed (threshold T, at most M per fact) and followed when
facts are searched (decay D, from the S best hits). For each write setting this starts one
fresh server (bench/serverproc.py) and runs bench/locomo_recall.py's own steps: ingest every
turn through AddFact, wait until the index holds every fact; then it counts the live links of
every fact through GetFact. For each read setting it starts a second server on the same
database (`--database-url`, read from the first one's postmaster.pid) with `--ltm-link-decay D
--ltm-link-seeds S` and asks every question through SearchFacts, and again as of the end of
the ingest. "0/0" follows no links: the ranking of today, on the same facts, so the paired
differences are against it. It reports R@k overall and per category, the paired R@10
difference (mean, standard error), links per fact and AddFact ingest rate. See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import grpc
from locomo_data import DEFAULT_DATA, Conversation, Question, load
from locomo_recall import (
    GRAPHNAME,
    REFERENCE,
    ask_all,
    ingest,
    served,
    username,
    wait_for_index,
)
from locomo_scoring import recall_table
from reporting import run_meta, write_report
from rpc import bounded
from serverproc import BenchServer, unwind_on_sigterm

from memory_client.v1 import memory_pb2 as pb
from memory_client.v1 import memory_pb2_grpc as pb_grpc

KS = (1, 5, 10, 20)
BASELINE = "0/0"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--data", type=Path, default=DEFAULT_DATA)
    p.add_argument("--write", default="0.6/5", help="threshold/links-per-fact, comma-separated")
    p.add_argument("--read", default="0.9/5", help="decay/seeds, comma-separated (0/0 is added)")
    p.add_argument("--limit-conversations", type=int, default=None)
    p.add_argument("--ingest-concurrency", type=int, default=16)
    p.add_argument("--index-timeout-s", type=float, default=900)
    p.add_argument("--skip-as-of", action="store_true", help="do not ask again as of the ingest")
    p.add_argument(
        "--prune",
        default="",
        help="T/M,...: after the reads, keep only the links with cosine >= T and each source's "
        "best M (a subset of what the write setting wrote), and ask again with --prune-read",
    )
    p.add_argument("--prune-read", default="0.9/5", help="decay/seeds for the pruned links")
    p.add_argument("--json-out", type=Path, default=Path("bench/results/locomo_links.json"))
    args = p.parse_args(argv)
    args.writes = [w.strip() for w in args.write.split(",") if w.strip()]
    reads = [r.strip() for r in args.read.split(",") if r.strip()]
    args.reads = [BASELINE, *[r for r in reads if r != BASELINE]]
    args.prunes = [x.strip() for x in args.prune.split(",") if x.strip()]
    return args


async def prune_links(dsn: str, config: str) -> dict[str, float]:
    """Keeps the links a stricter setting would have written (threshold T, each source's best
    M), from the full set saved on first use; returns links per fact."""
    t, m = config.split("/")
    conn = await asyncpg.connect(dsn)
    try:
        async with conn.transaction():
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS bench_links_all AS SELECT * FROM fact_links"
            )
            await conn.execute("DELETE FROM fact_links")
            await conn.execute(
                """INSERT INTO fact_links OVERRIDING SYSTEM VALUE
                   SELECT id, scope_id, source_version_id, target_version_id, score,
                          recorded_at, superseded_at, linked_at
                   FROM (SELECT *, row_number() OVER (PARTITION BY source_version_id
                                                      ORDER BY score DESC) AS r
                         FROM bench_links_all WHERE score >= $1) x
                   WHERE r <= $2""",
                float(t),
                int(m),
            )
        links = await conn.fetchval("SELECT count(*) FROM fact_links")
        facts = await conn.fetchval("SELECT count(*) FROM fact_versions")
        linked = await conn.fetchval(
            """SELECT count(*) FROM fact_versions v WHERE EXISTS (
                   SELECT 1 FROM fact_links l
                   WHERE l.source_version_id = v.id OR l.target_version_id = v.id)"""
        )
    finally:
        await conn.close()
    return {
        "facts": facts,
        "links": links,
        "links_per_fact": round(links / facts, 3),
        "mean_degree": round(2 * links / facts, 3),
        "facts_without_links_pct": round(100 * (facts - linked) / facts, 1),
    }


async def count_links(
    stub: pb_grpc.MemoryServiceStub, fact_to_turn: dict[str, dict[str, str]], concurrency: int
) -> dict[str, float]:
    """Live links per fact, from GetFact (each link is seen from both of its ends)."""
    degrees: list[int] = []

    async def one(job: tuple[str, str]) -> None:
        sample_id, fact_id = job
        got = await stub.GetFact(
            pb.GetFactRequest(username=username(sample_id), graphname=GRAPHNAME, fact_id=fact_id)
        )
        degrees.append(len(got.links))

    jobs = [(sid, fid) for sid, facts in fact_to_turn.items() for fid in facts]
    await bounded(jobs, concurrency, one)
    return {
        "facts": len(degrees),
        "links": sum(degrees) / 2,
        "links_per_fact": round(sum(degrees) / 2 / len(degrees), 3),
        "mean_degree": round(statistics.fmean(degrees), 3),
        "facts_without_links_pct": round(100 * sum(d == 0 for d in degrees) / len(degrees), 1),
    }


def per_question_r10(results: list[tuple[Question, list[str]]]) -> list[float]:
    return [100 * len(q.evidence & set(found[:10])) / len(q.evidence) for q, found in results]


async def write_phase(
    address: str, args: argparse.Namespace, conversations: list[Conversation]
) -> tuple[dict[str, Any], dict[str, dict[str, str]], datetime]:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = pb_grpc.MemoryServiceStub(channel)
        t0 = time.monotonic()
        fact_to_turn, added = await ingest(
            stub, conversations, args.ingest_concurrency, setups=(REFERENCE,)
        )
        ingest_s = time.monotonic() - t0
        after_ingest = datetime.now(UTC)
        index = await wait_for_index(
            stub, conversations, added, args.ingest_concurrency, args.index_timeout_s
        )
        links = await count_links(stub, fact_to_turn, args.ingest_concurrency)
    facts = sum(len(v) for v in fact_to_turn.values())
    out = {
        "ingest": {"facts": facts, "wall_s": round(ingest_s, 2), **index},
        "ingest_facts_per_s": round(facts / ingest_s, 1),
        "links": links,
    }
    return out, fact_to_turn, after_ingest


async def read_phase(
    address: str,
    conversations: list[Conversation],
    fact_to_turn: dict[str, dict[str, str]],
    after_ingest: datetime | None,
) -> dict[str, Any]:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = pb_grpc.MemoryServiceStub(channel)
        hits, lat = await ask_all(stub, conversations, fact_to_turn, max(KS), 1, "search")
        # Scored by the turns the server ranks (each hit's dia_id), in its order.
        plain = filtered = served(hits)
        if after_ingest is not None:
            hits_as_of, _ = await ask_all(
                stub, conversations, fact_to_turn, max(KS), 1, "as-of", as_of=after_ingest
            )
            filtered = served(hits_as_of)
    return {
        "recall": recall_table(plain, KS),
        "R@10_as_of": recall_table(filtered, KS)["all"]["R@10"] if after_ingest else None,
        "as_of_rankings_differ": sum(a[1] != b[1] for a, b in zip(plain, filtered, strict=True)),
        "search_p50_ms": round(1000 * statistics.median(lat), 2),
        "_per_question": per_question_r10(plain),
    }


def paired(base: list[float], other: list[float]) -> dict[str, float]:
    diffs = [b - a for a, b in zip(base, other, strict=True)]
    se = statistics.stdev(diffs) / math.sqrt(len(diffs)) if len(diffs) > 1 else 0.0
    return {"mean": round(statistics.fmean(diffs), 2), "se": round(se, 2)}


def write_args(config: str) -> list[str]:
    t, m = config.split("/")
    return ["--ltm-link-threshold", t, "--ltm-links-per-fact", m]


def read_args(config: str) -> list[str]:
    d, s = config.split("/")
    return ["--ltm-link-decay", d, "--ltm-link-seeds", s, "--ltm-links-per-fact", "0"]


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    conversations = load(args.data, args.limit_conversations)
    unwind_on_sigterm()
    started = time.time()
    results: dict[str, Any] = {}
    for w in args.writes:
        print(f"=== write {w}", file=sys.stderr)
        with BenchServer(["--max-facts-per-scope", "5000", *write_args(w)]) as writer:
            written, fact_to_turn, after_ingest = asyncio.run(
                write_phase(writer.address, args, conversations)
            )
            dsn = writer.dsn()
            reads: dict[str, Any] = {}
            for r in args.reads:
                print(f"=== write {w} read {r}", file=sys.stderr)
                extra = ["--database-url", dsn, "--max-facts-per-scope", "5000", *read_args(r)]
                with BenchServer(extra) as reader:
                    as_of = None if args.skip_as_of else after_ingest
                    reads[r] = asyncio.run(
                        read_phase(reader.address, conversations, fact_to_turn, as_of)
                    )
            base = reads[BASELINE]["_per_question"]
            for r in reads.values():
                r["paired_R@10"] = paired(base, r["_per_question"])
            results[w] = {**written, "reads": reads}
            report(results, started, args)  # after each write setting: a stopped run keeps it
            for pr in args.prunes:
                print(f"=== write {w} pruned to {pr}", file=sys.stderr)
                pruned_links = asyncio.run(prune_links(dsn, pr))
                extra = ["--database-url", dsn, "--max-facts-per-scope", "5000"]
                with BenchServer([*extra, *read_args(args.prune_read)]) as reader:
                    got = asyncio.run(read_phase(reader.address, conversations, fact_to_turn, None))
                got["paired_R@10"] = paired(base, got["_per_question"])
                results[f"{w}>{pr}"] = {
                    **written,
                    "links": pruned_links,
                    "reads": {args.prune_read: got},
                }
                report(results, started, args)


def report(results: dict[str, Any], started: float, args: argparse.Namespace) -> None:
    print(
        "write T/M | read D/S | R@1 | R@5 | R@10 | R@20 | multi-hop | temporal | open | single"
        " | dR@10 (se) | R@10 as-of | links/fact | no-link % | ingest/s | search p50 ms"
    )
    for w, res in results.items():
        for r, rr in res["reads"].items():
            rows = rr["recall"]
            cats = [rows[k]["R@10"] for k in rows if k != "all"]
            d = rr["paired_R@10"]
            print(
                f"{w} | {r} | "
                + " | ".join(str(rows["all"][f"R@{k}"]) for k in KS)
                + " | "
                + " | ".join(str(c) for c in cats)
                + f" | {d['mean']:+.2f} ({d['se']:.2f}) | {rr['R@10_as_of']}"
                + f" | {res['links']['links_per_fact']} | {res['links']['facts_without_links_pct']}"
                + f" | {res['ingest_facts_per_s']} | {rr['search_p50_ms']}",
                flush=True,
            )
    clean = {
        w: {
            **res,
            "reads": {
                r: {k: v for k, v in rr.items() if not k.startswith("_")}
                for r, rr in res["reads"].items()
            },
        }
        for w, res in results.items()
    }
    write_report(
        args.json_out,
        {
            "meta": {**run_meta(started), "data": str(args.data), "note": "shared 2-core machine"},
            **clean,
        },
    )


if __name__ == "__main__":
    main()
