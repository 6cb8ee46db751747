"""Would entity links help LoCoMo recall? An offline probe, before building them.

    .venv/bin/python bench/locomo_entity_probe.py [--limit-conversations N]

Starts one server with links off, ingests and indexes every turn as bench/locomo_recall.py
does, and asks every question through SearchFacts (top 100, with scores). Then, here in the
bench, it expands each ranking one hop the way memory.recall.expand does (the `seeds` best hits pull
in linked facts at source score * decay), with links drawn from the fact texts instead of
vectors, without an LLM:

- names: facts sharing a capitalised word (not the first word of the turn) that at most
  `--max-df` facts of the scope contain (speakers' names and "I" are in hundreds);
- rare: facts sharing a lowercase word of 5+ letters that 2..`--max-df` facts contain.

A fact links to at most `--m` others per kind, preferring the rarest shared word. It reports
R@10 overall and per category, and the paired difference against the plain ranking.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import re
import statistics
import sys
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
from locomo_data import CATEGORIES, DEFAULT_DATA, Conversation, Question, load
from locomo_recall import GRAPHNAME, REFERENCE, ingest, username, wait_for_index
from reporting import write_report
from rpc import bounded
from serverproc import serving

from memory_client.v1 import memory_pb2 as pb
from memory_client.v1 import memory_pb2_grpc as pb_grpc

_WORD = re.compile(r"[A-Za-z][A-Za-z'-]+")


def names(text: str) -> set[str]:
    words = _WORD.findall(text.split(":", 1)[-1])
    return {w for w in words[1:] if w[0].isupper() and len(w) > 1}


def rare_words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.split(":", 1)[-1]) if w.islower() and len(w) >= 5}


def entity_links(
    texts: dict[str, str], words_of: Callable[[str], set[str]], max_df: int, m: int
) -> dict[str, list[str]]:
    words = {fid: words_of(t) for fid, t in texts.items()}
    df = Counter(w for ws in words.values() for w in ws)
    holders: dict[str, list[str]] = defaultdict(list)
    for fid, ws in words.items():
        for w in ws:
            if 2 <= df[w] <= max_df:
                holders[w].append(fid)
    links: dict[str, list[str]] = {}
    for fid, ws in words.items():
        scored: dict[str, float] = {}
        for w in ws:
            if 2 <= df[w] <= max_df:
                for other in holders[w]:
                    if other != fid:
                        scored[other] = max(scored.get(other, 0.0), math.log(len(texts) / df[w]))
        links[fid] = [o for o, _ in sorted(scored.items(), key=lambda x: (-x[1], x[0]))[:m]]
    return links


def expand(
    ranked: list[tuple[str, float]], links: dict[str, list[str]], decay: float, seeds: int
) -> list[str]:
    best = dict(ranked)
    for fid, score in ranked[:seeds]:
        for other in links.get(fid, []):
            best[other] = max(best.get(other, 0.0), score * decay)
    return [f for f, _ in sorted(best.items(), key=lambda x: -x[1])]


def r10(q: Question, dia_ids: list[str]) -> float:
    return 100 * len(q.evidence & set(dia_ids[:10])) / len(q.evidence)


async def collect(
    address: str, conversations: list[Conversation]
) -> tuple[dict[str, dict[str, str]], dict[str, dict[str, str]], list[Any]]:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = pb_grpc.MemoryServiceStub(channel)
        fact_to_turn, added = await ingest(stub, conversations, 16, setups=(REFERENCE,))
        await wait_for_index(stub, conversations, added, 16, 900)
        texts = {sid: {f.fact_id: f.text for f in facts} for sid, facts in added.items()}
        answers: list[Any] = []

        async def ask(job: tuple[Conversation, Question]) -> None:
            c, q = job
            response = await stub.SearchFacts(
                pb.SearchFactsRequest(
                    username=username(c.sample_id),
                    graphname=GRAPHNAME,
                    query=q.text,
                    top_k=100,
                    threshold=0,
                )
            )
            answers.append((c, q, [(r.fact.fact_id, r.score) for r in response.results]))

        await bounded([(c, q) for c in conversations for q in c.questions], 1, ask)
    return fact_to_turn, texts, answers


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--data", type=Path, default=DEFAULT_DATA)
    p.add_argument("--limit-conversations", type=int, default=None)
    p.add_argument("--max-df", type=int, default=10)
    p.add_argument("--m", type=int, default=5)
    p.add_argument("--json-out", type=Path, default=Path("bench/results/locomo_entity.json"))
    args = p.parse_args(argv)
    conversations = load(args.data, args.limit_conversations)
    with serving(["--max-facts-per-scope", "5000", "--ltm-links-per-fact", "0"]) as server:
        fact_to_turn, texts, answers = asyncio.run(collect(server.address, conversations))
    kinds: dict[str, Callable[[str], set[str]]] = {"names": names, "rare": rare_words}
    links = {
        (kind, c.sample_id): entity_links(texts[c.sample_id], words_of, args.max_df, args.m)
        for kind, words_of in kinds.items()
        for c in conversations
    }
    # (kind, decay, seeds); kind "" = the plain ranking.
    variants: dict[str, tuple[str, float, int]] = {"plain": ("", 0.0, 0)}
    for kind in kinds:
        for decay in (0.5, 0.7, 0.9):
            for seeds in (3, 5):
                variants[f"{kind} d={decay} s={seeds}"] = (kind, decay, seeds)
    report: dict[str, Any] = {}
    base: list[float] = []
    for name, (kind, decay, seeds) in variants.items():
        per_q = []
        cats: dict[int, list[float]] = defaultdict(list)
        for c, q, ranked in answers:
            order = (
                expand(ranked, links[(kind, c.sample_id)], decay, seeds)
                if kind
                else [f for f, _ in ranked]
            )
            dia = [fact_to_turn[c.sample_id][f] for f in order]
            per_q.append(r10(q, dia))
            cats[q.category].append(per_q[-1])
        if name == "plain":
            base = per_q
        diffs = [b - a for a, b in zip(base, per_q, strict=True)]
        report[name] = {
            "R@10": round(statistics.fmean(per_q), 2),
            **{f"{k} {CATEGORIES[k]}": round(statistics.fmean(v), 2) for k, v in cats.items()},
            "paired": round(statistics.fmean(diffs), 2),
            "se": round(statistics.stdev(diffs) / math.sqrt(len(diffs)), 2),
        }
        print(name, report[name], file=sys.stdout)
    write_report(args.json_out, report)


if __name__ == "__main__":
    main()
