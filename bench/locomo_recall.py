"""LoCoMo turn-level recall of long-term memory's hybrid search, end to end over gRPC.

    .venv/bin/python bench/locomo_recall.py [--data PATH] [--k 1,5,10,20]
                                            [--limit-conversations N]

Starts its own server (fresh temp data dir under /tmp), stores every turn of each
conversation as a fact ("Speaker: text") through AddFact in one scope per conversation, waits
until the vector index holds every one of them, then asks each category 1-4 question with
evidence through SearchFacts and scores turn-level Recall@k. See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import grpc
from google.protobuf.timestamp_pb2 import Timestamp
from locomo_data import DEFAULT_DATA, Conversation, Question, Turn, load
from locomo_scoring import (
    PROBE_TOP_K,
    TARGET_R10,
    latency_ms,
    print_report,
    recall_table,
    threshold_table,
)
from reporting import (
    run_meta,
    server_outcome,
    unwind_on_sigterm,
    write_report,
)
from serverproc import BenchServer

from memory_client.v1 import memory_pb2 as pb
from memory_client.v1 import memory_pb2_grpc as pb_grpc

GRAPHNAME = "LoCoMo"
# A fact found by its own text scores ~1.0 by vector once it is indexed.
_SELF_COSINE = 0.99
T = TypeVar("T")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo json (read in place)")
    p.add_argument("--k", default="1,5,10,20", help="cut-offs, comma-separated (max 100)")
    p.add_argument("--limit-conversations", type=int, default=None, help="first N conversations")
    p.add_argument("--ingest-concurrency", type=int, default=16, help="AddFact calls in flight")
    p.add_argument(
        "--search-concurrency",
        type=int,
        default=1,
        help="SearchFacts calls in flight (1: latency is one call alone)",
    )
    p.add_argument(
        "--threshold",
        type=float,
        default=0.7,
        help="also ask with this threshold (top_k 100): evidence kept vs unrelated facts kept",
    )
    p.add_argument("--max-facts-per-scope", type=int, default=5000)
    p.add_argument("--index-timeout-s", type=float, default=600, help="wait for the index")
    p.add_argument("--server-arg", action="append", default=[], help="extra server flag")
    p.add_argument("--json-out", type=Path, default=Path("bench/results/locomo_recall.json"))
    args = p.parse_args(argv)
    args.ks = sorted({int(k) for k in args.k.split(",") if k.strip()})
    if not args.ks or args.ks[0] < 1 or args.ks[-1] > 100:
        p.error("--k: cut-offs between 1 and 100")
    if 10 not in args.ks:
        args.ks = sorted({*args.ks, 10})  # the as-of check compares R@10
    return args


def username(sample_id: str) -> str:
    return f"locomo-{sample_id}"


class Progress:
    """One stderr line updated in place."""

    def __init__(self, label: str, total: int) -> None:
        self.label, self.total, self.done = label, total, 0
        self.started = time.monotonic()
        self._shown = 0.0
        self._draw(force=True)

    def step(self, n: int = 1) -> None:
        self.done += n
        self._draw(force=self.done >= self.total)

    def _draw(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._shown < 0.2:
            return
        self._shown = now
        width = 30
        filled = int(width * self.done / self.total) if self.total else width
        elapsed = now - self.started
        rate = self.done / elapsed if elapsed > 0 else 0.0
        line = f"\r{self.label:<12}[{'#' * filled}{'.' * (width - filled)}] "
        line += f"{self.done}/{self.total} {elapsed:5.1f}s {rate:6.1f}/s"
        sys.stderr.write(line)
        if self.done >= self.total:
            sys.stderr.write("\n")
        sys.stderr.flush()


async def bounded(
    items: Iterable[T], concurrency: int, call: Callable[[T], Awaitable[None]]
) -> None:
    """Runs `call` on every item with at most `concurrency` in flight; the first error cancels
    the rest."""
    queue = list(items)[::-1]

    async def worker() -> None:
        while queue:
            await call(queue.pop())

    workers = [asyncio.ensure_future(worker()) for _ in range(max(1, concurrency))]
    try:
        await asyncio.gather(*workers)
    finally:
        for w in workers:
            w.cancel()
        await asyncio.gather(*workers, return_exceptions=True)


# --- ingestion -------------------------------------------------------------------------------


async def ingest(
    stub: pb_grpc.MemoryServiceStub, conversations: Sequence[Conversation], concurrency: int
) -> tuple[dict[str, dict[str, str]], dict[str, list[tuple[str, str]]]]:
    """AddFact for every turn, in dialogue order per conversation (conversations interleaved).
    Returns fact_id -> dia_id per conversation, and (fact_id, text) in completion order."""
    fact_to_turn: dict[str, dict[str, str]] = {c.sample_id: {} for c in conversations}
    added: dict[str, list[tuple[str, str]]] = {c.sample_id: [] for c in conversations}
    longest = max(len(c.turns) for c in conversations)
    jobs = [(c, c.turns[i]) for i in range(longest) for c in conversations if i < len(c.turns)]
    progress = Progress("ingest", len(jobs))

    async def add(job: tuple[Conversation, Turn]) -> None:
        conversation, turn = job
        response = await stub.AddFact(
            pb.AddFactRequest(
                username=username(conversation.sample_id),
                graphname=GRAPHNAME,
                text=turn.memory_text,
                kind="other",
            )
        )
        fact_to_turn[conversation.sample_id][response.fact.fact_id] = turn.dia_id
        added[conversation.sample_id].append((response.fact.fact_id, response.fact.text))
        progress.step()

    await bounded(jobs, concurrency, add)
    return fact_to_turn, added


async def indexed(stub: pb_grpc.MemoryServiceStub, sample_id: str, fact_id: str, text: str) -> bool:
    """True when the fact is in the vector index: searched by its own text, it comes back with
    a vector score of ~1 (a lexical-only hit has vector score 0). top_k is the maximum, 100,
    which is at least the 50 + 50 candidates the server fuses, so ties in the fused score
    cannot hide the fact."""
    response = await stub.SearchFacts(
        pb.SearchFactsRequest(
            username=username(sample_id),
            graphname=GRAPHNAME,
            query=text,
            top_k=PROBE_TOP_K,
            threshold=0,
        )
    )
    return any(
        r.fact.fact_id == fact_id and r.vector_score >= _SELF_COSINE for r in response.results
    )


async def wait_for_index(
    stub: pb_grpc.MemoryServiceStub,
    conversations: Sequence[Conversation],
    added: dict[str, list[tuple[str, str]]],
    concurrency: int,
    timeout_s: float,
) -> dict[str, Any]:
    """Polls until the last fact added to each scope is in the vector index, then checks every
    fact the same way (re-polling any still missing) until all are there or time runs out."""
    started = time.monotonic()
    deadline = started + timeout_s
    waiting = {sid: facts[-1] for sid, facts in added.items()}
    while waiting:
        for sid, (fact_id, text) in list(waiting.items()):
            if await indexed(stub, sid, fact_id, text):
                del waiting[sid]
        if waiting:
            if time.monotonic() > deadline:
                raise RuntimeError(f"vector index did not catch up within {timeout_s}s")
            await asyncio.sleep(0.25)
    caught_up_s = time.monotonic() - started

    missing = [(sid, fid, text) for sid, facts in added.items() for fid, text in facts]
    total = len(missing)
    progress = Progress("verify index", total)
    rounds = 0
    still: list[tuple[str, str, str]] = []

    async def check(item: tuple[str, str, str]) -> None:
        sid, fid, text = item
        if await indexed(stub, sid, fid, text):
            progress.step()
        else:
            still.append(item)

    while missing:
        rounds += 1
        still.clear()
        await bounded(missing, concurrency, check)
        missing = list(still)
        if missing:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{len(missing)} facts never reached the vector index")
            await asyncio.sleep(0.5)
    return {
        "last_added_indexed_after_s": round(caught_up_s, 2),
        "all_verified_after_s": round(time.monotonic() - started, 2),
        "facts_verified": total,
        "verify_rounds": rounds,
    }


# --- questions -------------------------------------------------------------------------------


def timestamp(moment: datetime) -> Timestamp:
    ts = Timestamp()
    ts.FromDatetime(moment)
    return ts


async def ask_all(
    stub: pb_grpc.MemoryServiceStub,
    conversations: Sequence[Conversation],
    fact_to_turn: dict[str, dict[str, str]],
    top_k: int,
    concurrency: int,
    label: str,
    as_of: datetime | None = None,
    threshold: float = 0.0,
) -> tuple[list[tuple[Question, list[str]]], list[float]]:
    """Every question in its conversation's scope; returns the ranked dia_ids per question and
    the latency of each SearchFacts call."""
    jobs = [(c, q) for c in conversations for q in c.questions]
    ranked: dict[tuple[str, int], list[str]] = {}
    latencies: list[float] = []
    progress = Progress(label, len(jobs))

    async def ask(job: tuple[Conversation, Question]) -> None:
        conversation, question = job
        request = pb.SearchFactsRequest(
            username=username(conversation.sample_id),
            graphname=GRAPHNAME,
            query=question.text,
            top_k=top_k,
            threshold=threshold,
        )
        if as_of is not None:
            request.as_of_valid_time.CopyFrom(timestamp(as_of))
            request.as_of_transaction_time.CopyFrom(timestamp(as_of))
        began = time.perf_counter()
        response = await stub.SearchFacts(request)
        latencies.append(time.perf_counter() - began)
        turns = fact_to_turn[conversation.sample_id]
        ranked[(conversation.sample_id, question.index)] = [
            turns[r.fact.fact_id] for r in response.results
        ]
        progress.step()

    await bounded(jobs, concurrency, ask)
    return [(q, ranked[(c.sample_id, q.index)]) for c, q in jobs], latencies


# --- run -------------------------------------------------------------------------------------


async def run(address: str, args: argparse.Namespace, conversations: list[Conversation]) -> Any:
    top_k = args.ks[-1]
    out: dict[str, Any] = {}
    async with grpc.aio.insecure_channel(address) as channel:
        stub = pb_grpc.MemoryServiceStub(channel)
        t0 = time.monotonic()
        fact_to_turn, added = await ingest(stub, conversations, args.ingest_concurrency)
        ingest_s = time.monotonic() - t0
        # Every fact is recorded (and valid) from before this moment.
        after_ingest = datetime.now(UTC)
        index = await wait_for_index(
            stub, conversations, added, args.ingest_concurrency, args.index_timeout_s
        )
        out["ingest"] = {
            "facts": sum(len(v) for v in fact_to_turn.values()),
            "wall_s": round(ingest_s, 2),
            "facts_per_s": round(sum(len(v) for v in fact_to_turn.values()) / ingest_s, 1),
            **index,
        }
        plain, lat = await ask_all(
            stub, conversations, fact_to_turn, top_k, args.search_concurrency, "search"
        )
        filtered, lat_as_of = await ask_all(
            stub,
            conversations,
            fact_to_turn,
            top_k,
            args.search_concurrency,
            "search as-of",
            as_of=after_ingest,
        )
        thresholded, _ = await ask_all(
            stub,
            conversations,
            fact_to_turn,
            PROBE_TOP_K,
            args.search_concurrency,
            f"search >={args.threshold}",
            threshold=args.threshold,
        )
    out["threshold_check"] = threshold_table(thresholded, args.threshold)
    out["recall"] = recall_table(plain, args.ks)
    out["recall_as_of"] = recall_table(filtered, args.ks)
    out["search_latency"] = latency_ms(lat)
    out["search_latency_as_of"] = latency_ms(lat_as_of)
    r10, r10_as_of = out["recall"]["all"]["R@10"], out["recall_as_of"]["all"]["R@10"]
    out["as_of_check"] = {
        "as_of": after_ingest.isoformat(),
        "R@10": r10,
        "R@10_as_of": r10_as_of,
        "match": r10 == r10_as_of,
        "questions_with_different_ranking": sum(
            a[1] != b[1] for a, b in zip(plain, filtered, strict=True)
        ),
    }
    return out


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    conversations = load(args.data, args.limit_conversations)
    # SIGTERM unwinds like Ctrl-C, so the server is always stopped and the temp dir removed.
    unwind_on_sigterm()
    started = time.time()
    server_args = ["--max-facts-per-scope", str(args.max_facts_per_scope), *args.server_arg]
    server = BenchServer(server_args)
    try:
        with server:
            print(f"server {server.address}, data dir {server.data_dir}", file=sys.stderr)
            results = asyncio.run(run(server.address, args, conversations))
    except KeyboardInterrupt:
        print("\ninterrupted; server stopped", file=sys.stderr)
        raise SystemExit(130) from None
    report: dict[str, Any] = {
        "meta": {
            **run_meta(started),
            "data": str(args.data),
            "conversations": [c.sample_id for c in conversations],
            "turns": sum(len(c.turns) for c in conversations),
            "questions": sum(len(c.questions) for c in conversations),
            "skipped_no_evidence": sum(c.skipped_no_evidence for c in conversations),
            "dropped_evidence_ids": [e for c in conversations for e in c.dropped_evidence_ids],
            "ks": args.ks,
            "search_concurrency": args.search_concurrency,
            "memory_text": "Speaker: text",
            "metric": "turn-level Recall@k = evidence turns in top k / evidence turns, "
            "averaged over category 1-4 questions with evidence (percent)",
            "target_R@10": TARGET_R10,
        },
        **results,
        "server": server_outcome(server),
    }
    print_report(report, args.ks)
    write_report(args.json_out, report)


if __name__ == "__main__":
    main()
