"""LoCoMo turn recall through the learning path: what StartTurn/CompleteTurn actually keep.

    .venv/bin/python bench/locomo_learning.py [--data PATH] [--limit-conversations N]
                                              [--limit-sessions N] [--no-addfact]
                                              [--server-arg=--llm-base-url=URL ...]

Starts its own server (fresh temp data dir under /tmp, metrics on), feeds every LoCoMo
conversation turn by turn through StartTurn/CompleteTurn in two scopes per conversation (each
speaker once as the user, the other as the assistant), with the sessions' own times, waits on
the server's metrics until learning and indexing are done, then asks every category 1-4
question with SearchFacts in both scopes and scores the evidence turns covered by the
provenance of the top k facts. Beside it, in the same server, the AddFact-per-turn figure of
bench/locomo_recall.py. See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import grpc
from latency import calls_summary
from locomo_data import DEFAULT_DATA, Conversation, load, retention_covering
from locomo_feed import (
    GRAPHNAME,
    Extras,
    Fed,
    Side,
    feed_side,
    load_extras,
    metrics_url,
    wait_until_learned,
)
from locomo_learning_scoring import (
    name_free,
    observation_table,
    print_report,
    recall_table,
)
from locomo_recall import REFERENCE, ask_all, ingest, wait_for_index
from locomo_recalled import ask_recalled, by_conversation, per_question
from reporting import Progress, run_meta, server_outcome, write_report
from rpc import PROBE_TOP_K, bounded
from serverproc import BenchServer, serving

from memory_client.v1 import memory_pb2 as pb
from memory_client.v1 import memory_pb2_grpc as pb_grpc

TARGET_R10 = 50.0  # issue 16's target for offline extraction, percent
TARGET_OBSERVATIONS = 50.0
_COSINES = (0.5, 0.6, 0.7)
_MATCH_COSINE = 0.5  # the headline observation match


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo json (read in place)")
    p.add_argument("--k", default="1,5,10,20", help="cut-offs, comma-separated (max 100)")
    p.add_argument("--limit-conversations", type=int, default=None, help="first N conversations")
    p.add_argument(
        "--limit-sessions",
        type=int,
        default=None,
        help="first N sessions of each; only questions whose evidence lies in them",
    )
    p.add_argument("--feed-concurrency", type=int, default=10, help="scopes fed at once")
    p.add_argument(
        "--pause-ms",
        type=float,
        default=0.0,
        help="after each reply, before the user's next turn (0: at once)",
    )
    p.add_argument("--search-concurrency", type=int, default=4, help="SearchFacts in flight")
    p.add_argument("--max-facts-per-scope", type=int, default=5000)
    p.add_argument("--learn-timeout-s", type=float, default=1800, help="wait for learning")
    p.add_argument("--no-addfact", action="store_true", help="skip the AddFact-per-turn figure")
    p.add_argument(
        "--anonymous-scopes",
        action="store_true",
        help="name each scope learn-<sample>-speaker<i>, not after its speaker",
    )
    p.add_argument("--server-arg", action="append", default=[], help="extra server flag")
    p.add_argument("--json-out", type=Path, default=Path("bench/results/locomo_learning.json"))
    args = p.parse_args(argv)
    args.ks = sorted({int(k) for k in args.k.split(",") if k.strip()} | {10})
    if args.ks[0] < 1 or args.ks[-1] > 100:
        p.error("--k: cut-offs between 1 and 100")
    return args


def limit_sessions(conversations: Sequence[Conversation], n: int | None) -> list[Conversation]:
    if n is None:
        return list(conversations)
    out: list[Conversation] = []
    for c in conversations:
        turns = [t for t in c.turns if t.session <= n]
        kept = {t.dia_id for t in turns}
        questions = [q for q in c.questions if q.evidence <= kept]
        out.append(replace(c, turns=turns, questions=questions))
    return out


def sides(conversation: Conversation, extras: Extras, anonymous: bool = False) -> list[Side]:
    return [
        Side(conversation.sample_id, speaker, f"speaker{i}" if anonymous else "")
        for i, speaker in enumerate(extras.speakers)
    ]


# --- what was learned --------------------------------------------------------------------------


async def learned_facts(
    stub: pb_grpc.MemoryServiceStub, fed: Fed
) -> dict[str, tuple[frozenset[str], str]]:
    """fact_id -> (turns of every version's message, turn of the live version) for the live
    facts of one side's scope."""
    user = fed.side.username
    live: list[pb.Fact] = []
    token = ""
    while True:
        page = await stub.ListFacts(
            pb.ListFactsRequest(
                username=user, graphname=GRAPHNAME, page_size=1000, page_token=token
            )
        )
        live += page.facts
        token = page.next_page_token
        if not token:
            break
    out: dict[str, tuple[frozenset[str], str]] = {}
    for fact in live:
        fed.extractors[fact.extractor] = fed.extractors.get(fact.extractor, 0) + 1
        versions = (
            await stub.GetFact(
                pb.GetFactRequest(username=user, graphname=GRAPHNAME, fact_id=fact.fact_id)
            )
        ).versions
        turns = frozenset(
            fed.message_turn[v.message_id] for v in versions if v.message_id in fed.message_turn
        )
        out[fact.fact_id] = (turns, fed.message_turn.get(fact.message_id, ""))
    return out


async def match_observations(
    stub: pb_grpc.MemoryServiceStub,
    conversations: Sequence[Conversation],
    extras: dict[str, Extras],
    side_facts: dict[str, list[tuple[Side, dict[str, tuple[frozenset[str], str]]]]],
    concurrency: int,
) -> list[float | None]:
    """For each LoCoMo observation whose source turn was fed: the best vector score, for the
    observation's text without its speaker's name, of a fact learned from that same turn in
    the speaker's own scope (None: no fact came from that turn)."""
    jobs: list[tuple[Side, dict[str, tuple[frozenset[str], str]], str, str, tuple[str, ...]]] = []
    for c in conversations:
        fed_turns = {t.dia_id for t in c.turns}
        for side, facts in side_facts[c.sample_id]:
            for o in extras[c.sample_id].observations:
                if o.speaker == side.user and o.dia_id in fed_turns:
                    jobs.append((side, facts, o.text, o.dia_id, extras[c.sample_id].speakers))
    best: list[float | None] = []
    progress = Progress("observations", len(jobs))

    async def match(job: tuple[Side, dict[str, tuple[frozenset[str], str]], str, str, Any]) -> None:
        side, facts, text, dia_id, names = job
        from_turn = {fid for fid, (turns, _) in facts.items() if dia_id in turns}
        if not from_turn:
            best.append(None)
            progress.step()
            return
        response = await stub.SearchFacts(
            pb.SearchFactsRequest(
                username=side.username,
                graphname=GRAPHNAME,
                query=name_free(text, names),
                top_k=PROBE_TOP_K,
                threshold=0,
            )
        )
        scores = [r.vector_score for r in response.results if r.fact.fact_id in from_turn]
        best.append(max(scores, default=0.0))
        progress.step()

    await bounded(jobs, concurrency, match)
    return best


# --- run ---------------------------------------------------------------------------------------


async def run(
    server: BenchServer,
    args: argparse.Namespace,
    conversations: list[Conversation],
    extras: dict[str, Extras],
) -> dict[str, Any]:
    url = metrics_url(list(server.log))
    out: dict[str, Any] = {}
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.MemoryServiceStub(channel)
        all_sides = [
            (c, s)
            for c in conversations
            for s in sides(c, extras[c.sample_id], args.anonymous_scopes)
        ]
        progress = Progress("feed", sum(len(c.turns) for c, _ in all_sides))
        fed: list[Fed] = []

        async def feed(job: tuple[Conversation, Side]) -> None:
            c, side = job
            fed.append(await feed_side(stub, c, side, progress, args.pause_ms / 1000))

        t0 = time.monotonic()
        await bounded(all_sides, args.feed_concurrency, feed)
        feed_s = time.monotonic() - t0
        metrics = await wait_until_learned(url, args.learn_timeout_s)
        wait_s = time.monotonic() - t0 - feed_s

        side_facts: dict[str, list[tuple[Side, dict[str, tuple[frozenset[str], str]]]]] = {}
        for f in sorted(fed, key=lambda f: (f.side.sample_id, f.side.user)):
            side_facts.setdefault(f.side.sample_id, []).append(
                (f.side, await learned_facts(stub, f))
            )
        recalled = await ask_recalled(
            stub, conversations, side_facts, fed, args.ks[-1], args.search_concurrency
        )
        best = await match_observations(
            stub, conversations, extras, side_facts, args.search_concurrency
        )
        if not args.no_addfact:
            # The reference setup only: the one locomo_recall.py reports.
            fact_to_turn, added = await ingest(stub, conversations, 16, setups=(REFERENCE,))
            await wait_for_index(stub, conversations, added, 16, args.learn_timeout_s)
            ranked, _ = await ask_all(
                stub, conversations, fact_to_turn, args.ks[-1], args.search_concurrency, "AddFact"
            )
            out["recall_addfact"] = recall_table(
                [(q, [frozenset({h.dia_id}) for h in found]) for q, found in ranked], args.ks
            )
    user_turns = sum(len(f.start_s) for f in fed)
    live = sum(len(facts) for pairs in side_facts.values() for _, facts in pairs)
    learned = metrics.get("graphrag_memory_learning_duration_seconds_count", 0.0)
    tables = {
        "recall": recalled.combined,
        "recall_facts": recalled.facts,
        "recall_live_version": recalled.facts_live,
        "recall_episodes": recalled.episodes,
    }
    for key, results in tables.items():
        out[key] = recall_table(results, args.ks)
    out["recall_at_10_by_conversation"] = {
        key: by_conversation(conversations, results, 10) for key, results in tables.items()
    }
    out["recall_at_10_per_question"] = per_question(conversations, recalled.combined, 10)
    out["learning"] = {
        "user_turns": user_turns,
        "turn_pairs": sum(len(f.complete_s) for f in fed),
        "leading_replies_imported": sum(f.imported for f in fed),
        "unanswered_user_turns": sum(f.unanswered for f in fed),
        "feed_wall_s": round(feed_s, 2),
        "wait_after_feed_s": round(wait_s, 2),
        "live_facts": live,
        "facts_per_user_turn": round(live / user_turns, 3) if user_turns else None,
        "decisions": {
            d: int(metrics.get(f'graphrag_memory_fact_decisions_total{{decision="{d}"}}', 0))
            for d in ("ADD", "UPDATE", "DELETE", "NONE")
        },
        "learned_turns": int(learned),
        "learning_ms_per_turn": round(
            1000 * metrics.get("graphrag_memory_learning_duration_seconds_sum", 0.0) / learned, 2
        )
        if learned
        else None,
        "live_facts_by_extractor": {
            name: sum(f.extractors.get(name, 0) for f in fed)
            for name in sorted({n for f in fed for n in f.extractors})
        },
        "secrets_dropped": int(metrics.get("graphrag_memory_secrets_dropped_total", 0)),
        "live_facts_per_scope": {
            side.username: len(facts) for pairs in side_facts.values() for side, facts in pairs
        },
    }
    out["observations"] = {
        **observation_table(best, _COSINES),
        "match": f"a fact learned from the observation's source turn (any version's message) "
        f"whose vector score for the observation's text, speaker's name removed, is >= the "
        f"cosine; headline {_MATCH_COSINE}",
    }
    out["turn_latency"] = {
        "StartTurn": calls_summary([s for f in fed for s in f.start_s]),
        "CompleteTurn": calls_summary([s for f in fed for s in f.complete_s]),
    }
    out["final_metrics"] = {k: v for k, v in metrics.items() if "learning" in k or "fact" in k}
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    conversations = limit_sessions(load(args.data, args.limit_conversations), args.limit_sessions)
    extras = load_extras(args.data, [c.sample_id for c in conversations])
    started = time.time()
    server_args = [
        "--max-facts-per-scope",
        str(args.max_facts_per_scope),
        "--ltm-retention-days",
        str(retention_covering(conversations)),
        "--metrics-address",
        "127.0.0.1:0",
        *args.server_arg,
    ]
    with serving(server_args) as server:
        results = asyncio.run(run(server, args, conversations, extras))
    report: dict[str, Any] = {
        "meta": {
            **run_meta(started),
            "data": str(args.data),
            "conversations": [c.sample_id for c in conversations],
            "limit_sessions": args.limit_sessions,
            "turns": sum(len(c.turns) for c in conversations),
            "questions": sum(len(c.questions) for c in conversations),
            "ks": args.ks,
            "feed_concurrency": args.feed_concurrency,
            "pause_ms": args.pause_ms,
            "server_args": server_args,
            "fed_as": "two scopes per conversation (learn-<sample>-<speaker> / LoCoMo): the "
            "speaker's turns by StartTurn, the other's reply by CompleteTurn, a session's "
            "leading reply by AppendMessages; one conversation per session; created_at = the "
            "session's time + 1 s per turn",
            "metric": "turn Recall@k = evidence turns among the turns the top k hits come "
            "from / evidence turns, averaged over category 1-4 questions with evidence "
            "(percent, ± standard error); recall: facts (provenance) and episodes (their own "
            "message) of both speakers' scopes merged by score, each turn's episode once; "
            "recall_facts / recall_episodes: each alone",
            "target_R@10": TARGET_R10,
            "target_observation_match_pct": TARGET_OBSERVATIONS,
        },
        **results,
        "server": server_outcome(server),
    }
    print_report(report, args.ks)
    write_report(args.json_out, report)
    return report


if __name__ == "__main__":
    main()
