"""LoCoMo turn-level recall of long-term memory's hybrid search, end to end over gRPC.

    .venv/bin/python bench/locomo_recall.py [--data PATH] [--k 1,5,10,20]
                                            [--limit-conversations N]

Starts its own server (fresh temp data dir under /tmp) and stores every turn of each
conversation twice through AddFact, in two scopes per conversation: as the reference setup
does ("Speaker: text [shares <blip_caption>]", valid from its session's date time) and as this
benchmark did before ("Speaker: text", valid from now). It waits until the vector index holds
every fact, asks each category 1-4 question with evidence through SearchFacts in both, and
scores turn-level Recall@k with standard errors, the paired difference between the two on the
same questions, and a sweep of the time-intent weight. See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
from crossval import CrossValidation, leave_one_out, print_folds
from google.protobuf.timestamp_pb2 import Timestamp
from latency import calls_summary
from locomo_data import DEFAULT_DATA, Conversation, Question, Turn, load
from locomo_scoring import (
    TARGET_R10,
    paired_table,
    print_report,
    print_served,
    question_recall,
    recall_table,
    threshold_table,
)
from reporting import Progress, run_meta, server_outcome, write_report
from rpc import PROBE_TOP_K, Stored, bounded, is_indexed, timestamp, wait_indexed
from serverproc import serving

from memory_client.v1 import memory_pb2 as pb
from memory_client.v1 import memory_pb2_grpc as pb_grpc
from memory_server.extraction.event_dates import DateparserEvents
from memory_server.memory.facts.model import EventTime, FactKind, FactVersion
from memory_server.memory.recall.rank import fuse
from memory_server.memory.time.intent import dated_vote, has_time_intent
from memory_server.settings import Settings

GRAPHNAME = "LoCoMo"
# The two ways of storing a turn: as the reference setup does, and as this benchmark did before.
REFERENCE, BEFORE = "reference", "before"
SETUPS = (REFERENCE, BEFORE)
# Time-intent weights replayed on the reference setup's candidates (the server's own is one).
SWEEP = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5)
# Facts still not found by their own text after this long without change are counted, not
# waited for (wait_for_index).
SETTLED_S = 30.0
# The server's default ltm_time_intent_weight, the weight the run uses unless told otherwise.
SERVER_TIME_INTENT_WEIGHT = Settings().ltm_time_intent_weight


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
    p.add_argument(
        "--ingest-only",
        choices=SETUPS,
        default=None,
        help="store the turns of one setup, wait for the index, report ingest and stop",
    )
    p.add_argument(
        "--time-intent-weight",
        type=float,
        default=None,
        help="the server's ltm_time_intent_weight (default: the server's default)",
    )
    p.add_argument(
        "--folds",
        action="store_true",
        help="print the leave-one-conversation-out folds of the time-intent weight's sweep",
    )
    p.add_argument(
        "--served-only",
        action="store_true",
        help="store and ask the reference setup only, once: the served ranking, no before, "
        "as-of, threshold or replay (what crossval_sweep.py needs, in about half the time)",
    )
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


def username(sample_id: str, setup: str = REFERENCE) -> str:
    return f"locomo-{sample_id}" if setup == REFERENCE else f"locomo-{setup}-{sample_id}"


@dataclass(frozen=True, slots=True)
class Hit:
    """One SearchFacts result, with what it takes to rank it again offline."""

    dia_id: str
    score: float
    vector: float
    lexical: float
    version: FactVersion  # its times (valid_from, event_at) for the time-intent vote
    recorded: tuple[int, int]  # recorded_at (seconds, nanos): ties go to the newer

    @property
    def dated(self) -> bool:
        return self.version.event_at is not None

    def base(self) -> float:
        """The score without the time-intent vote: today's ranking (memory.recall.fuse)."""
        return fuse(self.vector, self.lexical)


_EVENTS = DateparserEvents()


def asked_when(question: str) -> EventTime | None:
    """The date the question names, as the server resolves it (memory.time.event_time)."""
    if not _EVENTS.needs_resolving(question):
        return None
    return _EVENTS.resolve(question, datetime.now(UTC))


def rerank(question: str, hits: Sequence[Hit], weight: float) -> list[str]:
    """The server's ranking (memory.recall.rank with memory.time_intent.dated_vote) replayed
    with another time-intent weight; 0 is the ranking before the vote existed."""
    vote = dated_vote(question, weight, asked_when(question))

    def key(h: Hit) -> tuple[float, tuple[int, int]]:
        score = fuse(h.base(), vote(h.version)) if vote is not None else h.base()
        return score, h.recorded

    return [h.dia_id for h in sorted(hits, key=key, reverse=True)]


def version_of(fact: pb.Fact) -> FactVersion:
    def at(ts: Timestamp) -> datetime:
        return ts.ToDatetime(UTC)

    return FactVersion(
        fact.version_id,
        fact.fact_id,
        fact.text,
        FactKind(fact.kind),
        at(fact.valid_from),
        at(fact.valid_to) if fact.HasField("valid_to") else None,
        at(fact.recorded_at),
        None,
        event_at=at(fact.event_time) if fact.HasField("event_time") else None,
        event_period=fact.event_period,
    )


# --- ingestion -------------------------------------------------------------------------------


async def _add_retrying(stub: pb_grpc.MemoryServiceStub, request: pb.AddFactRequest) -> Any:
    """AddFact, retried while the server answers UNAVAILABLE (it says "retry"; the same text
    again adds nothing new, so a retry after a lost answer is safe)."""
    delay = 0.1
    for _ in range(8):
        try:
            return await stub.AddFact(request)
        except grpc.aio.AioRpcError as exc:
            if exc.code() != grpc.StatusCode.UNAVAILABLE:
                raise
            await asyncio.sleep(delay)
            delay = min(2.0, delay * 2)
    return await stub.AddFact(request)


async def ingest(
    stub: pb_grpc.MemoryServiceStub,
    conversations: Sequence[Conversation],
    concurrency: int,
    setups: Sequence[str] = SETUPS,
) -> tuple[dict[str, dict[str, str]], dict[str, list[Stored]]]:
    """AddFact for every turn in both setups, in dialogue order per conversation
    (conversations and setups interleaved). Returns fact_id -> dia_id per conversation (both
    setups' ids), and the facts stored per conversation in completion order."""
    fact_to_turn: dict[str, dict[str, str]] = {c.sample_id: {} for c in conversations}
    added: dict[str, list[Stored]] = {c.sample_id: [] for c in conversations}
    longest = max(len(c.turns) for c in conversations)
    jobs = [
        (c, c.turns[i], setup)
        for i in range(longest)
        for c in conversations
        if i < len(c.turns)
        for setup in setups
    ]
    progress = Progress("ingest", len(jobs))

    async def add(job: tuple[Conversation, Turn, str]) -> None:
        conversation, turn, setup = job
        user = username(conversation.sample_id, setup)
        request = pb.AddFactRequest(
            username=user,
            graphname=GRAPHNAME,
            text=turn.memory_text if setup == REFERENCE else turn.plain_text,
            kind="other",
        )
        if setup == REFERENCE:
            # Said in its session (one conversation), at its place in it.
            request.valid_time.CopyFrom(timestamp(turn.spoken_at))
            request.conversation_id = f"{conversation.sample_id}-session-{turn.session}"
        response = await _add_retrying(stub, request)
        fact_to_turn[conversation.sample_id][response.fact.fact_id] = turn.dia_id
        added[conversation.sample_id].append(
            Stored(user, GRAPHNAME, response.fact.text, response.fact.fact_id)
        )
        progress.step()

    await bounded(jobs, concurrency, add)
    return fact_to_turn, added


async def wait_for_index(
    stub: pb_grpc.MemoryServiceStub,
    conversations: Sequence[Conversation],
    added: dict[str, list[Stored]],
    concurrency: int,
    timeout_s: float,
) -> dict[str, Any]:
    """Polls until the last fact added to each scope is in the vector index, then checks every
    fact the same way (re-polling any still missing) until all are there or time runs out."""
    started = time.monotonic()
    deadline = started + timeout_s
    caught_up_s = await wait_indexed(stub, [facts[-1] for facts in added.values()], timeout_s)

    missing = [fact for facts in added.values() for fact in facts]
    total = len(missing)
    progress = Progress("verify index", total)
    rounds = 0
    still: list[Stored] = []

    async def check(fact: Stored) -> None:
        if await is_indexed(stub, fact):
            progress.step()
        else:
            still.append(fact)

    settled_since = time.monotonic()
    while missing:
        rounds += 1
        before = {fact.fact_id for fact in missing}
        still.clear()
        await bounded(missing, concurrency, check)
        missing = list(still)
        if {fact.fact_id for fact in missing} != before:
            settled_since = time.monotonic()
        elif time.monotonic() - settled_since > SETTLED_S:
            # Each scope's last fact is indexed, and one server's outbox sends a scope's facts
            # in order, so these are in the index too: their own text (less the scope's common
            # words, which recall leaves out of the question) just does not find them by vector.
            break
        if missing:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{len(missing)} facts never reached the vector index")
            await asyncio.sleep(0.5)
    return {
        "last_added_indexed_after_s": round(caught_up_s, 2),
        "all_verified_after_s": round(time.monotonic() - started, 2),
        "facts_verified": total - len(missing),
        "not_found_by_own_text": len(missing),
        "verify_rounds": rounds,
    }


# --- questions -------------------------------------------------------------------------------


async def ask_all(
    stub: pb_grpc.MemoryServiceStub,
    conversations: Sequence[Conversation],
    fact_to_turn: dict[str, dict[str, str]],
    top_k: int,
    concurrency: int,
    label: str,
    setup: str = REFERENCE,
    as_of: datetime | None = None,
    threshold: float = 0.0,
) -> tuple[list[tuple[Question, list[Hit]]], list[float]]:
    """Every question in its conversation's scope of `setup`; returns the hits per question in
    the server's order and the latency of each SearchFacts call."""
    jobs = [(c, q) for c in conversations for q in c.questions]
    ranked: dict[tuple[str, int], list[Hit]] = {}
    latencies: list[float] = []
    progress = Progress(label, len(jobs))

    async def ask(job: tuple[Conversation, Question]) -> None:
        conversation, question = job
        request = pb.SearchFactsRequest(
            username=username(conversation.sample_id, setup),
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
            Hit(
                turns[r.fact.fact_id],
                r.score,
                r.vector_score,
                r.lexical_score,
                version_of(r.fact),
                (r.fact.recorded_at.seconds, r.fact.recorded_at.nanos),
            )
            for r in response.results
        ]
        progress.step()

    await bounded(jobs, concurrency, ask)
    return [(q, ranked[(c.sample_id, q.index)]) for c, q in jobs], latencies


def served(results: Sequence[tuple[Question, list[Hit]]]) -> list[tuple[Question, list[str]]]:
    """The server's own ranking."""
    return [(q, [h.dia_id for h in hits]) for q, hits in results]


def replayed(
    results: Sequence[tuple[Question, list[Hit]]], weight: float
) -> list[tuple[Question, list[str]]]:
    return [(q, rerank(q.text, hits, weight)) for q, hits in results]


def crossvalidated(
    results: Sequence[tuple[Question, list[Hit]]], conversations: Sequence[Conversation]
) -> CrossValidation:
    """The time-intent weight chosen by leave-one-conversation-out over the sweep, scored by
    R@10 on each held-out conversation (bench/crossval.py)."""
    ids = [c.sample_id for c in conversations for _ in c.questions]
    return leave_one_out(
        {
            w: [
                (sid, question_recall(q, found, 10))
                for sid, (q, found) in zip(ids, replayed(results, w), strict=True)
            ]
            for w in SWEEP
        }
    )


# --- run -------------------------------------------------------------------------------------


def served_only(
    reference: Sequence[tuple[Question, list[Hit]]],
    conversations: Sequence[Conversation],
    latencies: list[float],
    ks: Sequence[int],
) -> dict[str, Any]:
    """The report of a --served-only run: the served ranking's recall and each question's."""
    now = served(reference)
    ids = [c.sample_id for c in conversations for _ in c.questions]
    return {
        "recall": recall_table(now, ks),
        "search_latency": calls_summary(latencies),
        "per_question": [
            {
                "sample_id": sid,
                "index": q.index,
                "category": q.category,
                "evidence": sorted(q.evidence),
                "ranked": found[: ks[-1]],
            }
            for (q, found), sid in zip(now, ids, strict=True)
        ],
    }


async def run(address: str, args: argparse.Namespace, conversations: list[Conversation]) -> Any:
    out: dict[str, Any] = {}
    async with grpc.aio.insecure_channel(address) as channel:
        stub = pb_grpc.MemoryServiceStub(channel)
        t0 = time.monotonic()
        setups = SETUPS if args.ingest_only is None else (args.ingest_only,)
        if args.served_only:
            setups = (REFERENCE,)
        fact_to_turn, added = await ingest(stub, conversations, args.ingest_concurrency, setups)
        ingest_s = time.monotonic() - t0
        # Every fact is recorded (and valid) from before this moment.
        after_ingest = datetime.now(UTC)
        index = await wait_for_index(
            stub, conversations, added, args.ingest_concurrency, args.index_timeout_s
        )
        facts = sum(len(v) for v in fact_to_turn.values())
        out["ingest"] = {
            "facts": facts,
            "setups": list(setups),
            "wall_s": round(ingest_s, 2),
            "facts_per_s": round(facts / ingest_s, 1),
            **index,
        }
        if args.ingest_only is not None:
            return out
        # top_k 100: every fused candidate, so that other weights can be replayed exactly.
        reference, lat = await ask_all(
            stub,
            conversations,
            fact_to_turn,
            PROBE_TOP_K,
            args.search_concurrency,
            "search",
        )
        if args.served_only:
            return {**out, **served_only(reference, conversations, lat, args.ks)}
        before, _ = await ask_all(
            stub,
            conversations,
            fact_to_turn,
            PROBE_TOP_K,
            args.search_concurrency,
            "search before",
            setup=BEFORE,
        )
        filtered, lat_as_of = await ask_all(
            stub,
            conversations,
            fact_to_turn,
            PROBE_TOP_K,
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
    ks = args.ks
    now = served(reference)
    today = replayed(before, 0.0)  # the text, valid time and ranking before this change
    out["threshold_check"] = threshold_table(served(thresholded), args.threshold)
    out["recall"] = recall_table(now, ks)
    out["recall_before"] = recall_table(today, ks)
    out["recall_captions_only"] = recall_table(replayed(reference, 0.0), ks)
    out["paired_vs_before"] = paired_table(now, today, ks)
    out["recall_as_of"] = recall_table(served(filtered), ks)
    out["sweep_time_intent_weight"] = {
        f"{w:g}": {
            group: {f"R@{k}": row[f"R@{k}"] for k in ks}
            for group, row in recall_table(replayed(reference, w), ks).items()
        }
        for w in SWEEP
    }
    if len(conversations) > 1:
        out["crossval_time_intent_weight"] = dataclasses.asdict(
            crossvalidated(reference, conversations)
        )
    dated = [sum(h.dated for h in hits) / max(1, len(hits)) for _, hits in reference]
    out["dated_share_of_candidates_pct"] = round(100 * sum(dated) / len(dated), 1)
    out["time_intent_questions"] = sum(has_time_intent(q.text) for q, _ in reference)
    out["questions_naming_a_date"] = sum(asked_when(q.text) is not None for q, _ in reference)
    if args.time_intent_weight is not None:
        # The replay is exact: it must give the server's own ranking at the server's weight.
        replay = replayed(reference, args.time_intent_weight)
        out["replay_check"] = {
            "weight": args.time_intent_weight,
            "rankings_differ": sum(a[1] != b[1] for a, b in zip(replay, now, strict=True)),
        }
    out["search_latency"] = calls_summary(lat)
    out["search_latency_as_of"] = calls_summary(lat_as_of)
    r10, r10_as_of = out["recall"]["all"]["R@10"], out["recall_as_of"]["all"]["R@10"]
    out["as_of_check"] = {
        "as_of": after_ingest.isoformat(),
        "R@10": r10,
        "R@10_as_of": r10_as_of,
        "match": r10 == r10_as_of,
        "questions_with_different_ranking": sum(
            a[1] != b[1] for a, b in zip(now, served(filtered), strict=True)
        ),
    }
    out["per_question"] = [
        {
            "sample_id": sid,
            "index": q.index,
            "category": q.category,
            "evidence": sorted(q.evidence),
            "ranked": found[: ks[-1]],
            "ranked_before": old[: ks[-1]],
        }
        for (q, found), (_, old), sid in zip(
            now,
            today,
            [c.sample_id for c in conversations for _ in c.questions],
            strict=True,
        )
    ]
    return out


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    conversations = load(args.data, args.limit_conversations)
    started = time.time()
    server_args = ["--max-facts-per-scope", str(args.max_facts_per_scope), *args.server_arg]
    if args.time_intent_weight is not None:
        server_args += ["--ltm-time-intent-weight", str(args.time_intent_weight)]
    with serving(server_args) as server:
        results = asyncio.run(run(server.address, args, conversations))
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
            "memory_text": {
                REFERENCE: "Speaker: text [shares blip_caption], valid from the session's time",
                BEFORE: "Speaker: text, valid from now",
            },
            "metric": "turn-level Recall@k = evidence turns in top k / evidence turns, "
            "averaged over category 1-4 questions with evidence (percent)",
            "target_R@10": TARGET_R10,
        },
        **results,
        "server": server_outcome(server),
    }
    if args.served_only:
        print_served(report, args.ks)
    elif args.ingest_only is None:
        print_report(report, args.ks)
        if args.folds and "crossval_time_intent_weight" in report:
            print_folds(
                "time-intent weight, R@10",
                report["crossval_time_intent_weight"],
                SERVER_TIME_INTENT_WEIGHT
                if args.time_intent_weight is None
                else args.time_intent_weight,
            )
    else:
        print(report["ingest"])
    write_report(args.json_out, report)


if __name__ == "__main__":
    main()
