"""What a turn recalls through the learning path: facts (SearchFacts) and episodes
(SearchEpisodes), asked in both speakers' scopes of a LoCoMo conversation and scored by the
turns they come from (bench/locomo_learning.py).

A fact's turns are its provenance (every version's message, or the live version's only); an
episode's turn is its own message. Both searches score alike (the hybrid of memory.recall.rank,
in [0, 1]), so the two lists are merged by score. Each speaker's scope holds every message of
the conversation (the other speaker's as the assistant), so the same turn comes back from
both scopes as an episode: it is ranked once, where it first appears; in the merged list a hit
whose turns the hits above it cover takes no place.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from locomo_data import Conversation, Question
from locomo_feed import GRAPHNAME, Fed, Side
from locomo_learning_scoring import Ranked, covered
from reporting import Progress
from rpc import bounded

from memory_client.v1 import memory_pb2 as pb
from memory_client.v1 import memory_pb2_grpc as pb_grpc

# fact_id -> (turns of every version's message, turn of the live version)
LearnedFacts = dict[str, tuple[frozenset[str], str]]
SideFacts = dict[str, list[tuple[Side, LearnedFacts]]]
Results = list[tuple[Question, Ranked]]


@dataclass(frozen=True, slots=True)
class Recalled:
    """One question's rankings, each a list of the turns every hit comes from, best first."""

    combined: Ranked  # facts (every version's turns) and episodes merged by score
    facts: Ranked  # facts only, every version's turns
    facts_live: Ranked  # facts only, the live version's turn
    episodes: Ranked  # episodes only


@dataclass(frozen=True, slots=True)
class RecalledTables:
    combined: Results
    facts: Results
    facts_live: Results
    episodes: Results


def _dedupe(hits: Sequence[tuple[float, str]]) -> list[tuple[float, str]]:
    """Episode hits (score, turn) best first, each turn once."""
    seen: set[str] = set()
    out: list[tuple[float, str]] = []
    for score, turn in sorted(hits, key=lambda h: -h[0]):
        if turn not in seen:
            seen.add(turn)
            out.append((score, turn))
    return out


def _without_repeats(ranked: Ranked) -> Ranked:
    """Hits whose turns the hits above them already cover are left out, as a turn's context
    leaves out the message a shown fact came from (memory.conversation.stm): a fact and the
    episode of the same turn take one place, not two."""
    covered: set[str] = set()
    out: Ranked = []
    for turns in ranked:
        if turns and turns <= covered:
            continue
        covered |= turns
        out.append(turns)
    return out


async def ask_one(
    stub: pb_grpc.MemoryServiceStub,
    question: Question,
    sides: Sequence[tuple[Side, LearnedFacts]],
    message_turn: dict[str, str],
    top_k: int,
) -> Recalled:
    facts: list[tuple[float, frozenset[str], str]] = []
    episodes: list[tuple[float, str]] = []
    for side, learned in sides:
        user = side.username
        found = await stub.SearchFacts(
            pb.SearchFactsRequest(
                username=user, graphname=GRAPHNAME, query=question.text, top_k=top_k, threshold=0
            )
        )
        for r in found.results:
            turns, live_turn = learned.get(r.fact.fact_id, (frozenset(), ""))
            facts.append((r.score, turns, live_turn))
        said = await stub.SearchEpisodes(
            pb.SearchEpisodesRequest(
                username=user, graphname=GRAPHNAME, query=question.text, top_k=top_k, threshold=0
            )
        )
        for e in said.results:
            episodes.append((e.score, message_turn.get(e.message.message_id, "")))
    facts.sort(key=lambda h: -h[0])
    unique = _dedupe(episodes)
    merged = sorted(
        [(score, turns) for score, turns, _ in facts]
        + [(score, frozenset({turn}) if turn else frozenset()) for score, turn in unique],
        key=lambda h: -h[0],
    )
    return Recalled(
        combined=_without_repeats([turns for _, turns in merged]),
        facts=[turns for _, turns, _ in facts],
        facts_live=[frozenset({live}) if live else frozenset() for _, _, live in facts],
        episodes=[frozenset({turn}) if turn else frozenset() for _, turn in unique],
    )


async def ask_recalled(
    stub: pb_grpc.MemoryServiceStub,
    conversations: Sequence[Conversation],
    side_facts: SideFacts,
    fed: Sequence[Fed],
    top_k: int,
    concurrency: int,
) -> RecalledTables:
    """Every question of every conversation, in both speakers' scopes."""
    message_turn: dict[str, str] = {}
    for f in fed:
        message_turn.update(f.message_turn)
    jobs = [(c, q) for c in conversations for q in c.questions]
    found: dict[tuple[str, int], Recalled] = {}
    progress = Progress("search", len(jobs))

    async def ask(job: tuple[Conversation, Question]) -> None:
        conversation, question = job
        found[(conversation.sample_id, question.index)] = await ask_one(
            stub, question, side_facts[conversation.sample_id], message_turn, top_k
        )
        progress.step()

    await bounded(jobs, concurrency, ask)
    ordered = [(q, found[(c.sample_id, q.index)]) for c, q in jobs]
    return RecalledTables(
        combined=[(q, r.combined) for q, r in ordered],
        facts=[(q, r.facts) for q, r in ordered],
        facts_live=[(q, r.facts_live) for q, r in ordered],
        episodes=[(q, r.episodes) for q, r in ordered],
    )


def by_conversation(
    conversations: Sequence[Conversation], results: Results, k: int
) -> dict[str, float]:
    """Turn R@k (percent) of each conversation's questions: the spread across the five folds
    of leave-one-conversation-out (nothing here is tuned on the scored conversation)."""
    out: dict[str, float] = {}
    start = 0
    for c in conversations:
        mine = results[start : start + len(c.questions)]
        start += len(c.questions)
        if mine:
            out[c.sample_id] = round(100 * sum(covered(q, r, k) for q, r in mine) / len(mine), 2)
    return out


def per_question(
    conversations: Sequence[Conversation], results: Results, k: int
) -> list[tuple[str, float]]:
    """(conversation, turn R@k in [0, 1]) of each question, in order: what leave-one-
    conversation-out cross-validation needs (bench/crossval.py)."""
    owners = [c.sample_id for c in conversations for _ in c.questions]
    return [(owner, covered(q, r, k)) for owner, (q, r) in zip(owners, results, strict=True)]
