"""The second hop of recall (memory.recall.second_hop), through the real server: a question
that needs two facts finds the first by its words and the second only through the first, when
the hop is on; the hop's score is the documented formula; weight 0 is recall without it."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memory_client.v1 import memory_pb2 as pb
from memory_server.memory.facts.model import FactKind, FactVersion
from memory_server.memory.recall.rank import ScoredFact
from memory_server.memory.recall.second_hop import HopSettings, bridges, hop_question, merge

from conftest import RunningServer, ServerFactory, assert_eventually

# Links and neighbours off: what the hop brings in must come from the hop alone.
NO_LINKS = {"ltm_links_per_fact": 0, "ltm_link_decay": 0.0, "ltm_neighbour_decay": 0.0}
WEIGHT = 0.9

QUESTION = "What did Caroline sign up for after the LGBTQ support group?"
BRIDGE = "Caroline went to the LGBTQ support group and felt welcome among its members"
ANSWER = "Feeling welcome among those members made her enrol in a counseling course"
OTHERS = [
    "Caroline bought a new guitar for the summer concert",
    "Melanie signed the kids up for swimming lessons after school",
    "Caroline asked Melanie for a recipe for apple pie",
    "The museum trip was cancelled because of the storm",
]


async def _add(memory: RunningServer, scope: dict[str, str], text: str) -> pb.Fact:
    return (await memory.stub.AddFact(pb.AddFactRequest(**scope, text=text))).fact


async def _search(
    memory: RunningServer, scope: dict[str, str], query: str, top_k: int = 10
) -> list[pb.ScoredFact]:
    request = pb.SearchFactsRequest(**scope, query=query, top_k=top_k, threshold=0)
    return list((await memory.stub.SearchFacts(request)).results)


async def _indexed(memory: RunningServer, scope: dict[str, str], fact_id: str, text: str) -> bool:
    found = {r.fact.fact_id: r for r in await _search(memory, scope, text)}
    return fact_id in found and found[fact_id].vector_score > 0.99


async def test_second_hop_finds_the_fact_only_the_first_hit_leads_to(
    start_server: ServerFactory, scope: dict[str, str]
) -> None:
    # Two servers on one database: the hop is read-time, so only the search differs.
    hopping = await start_server(**NO_LINKS, ltm_second_hop_weight=WEIGHT)
    plain = await start_server(**NO_LINKS, ltm_second_hop_weight=0.0)
    bridge = await _add(hopping, scope, BRIDGE)
    answer = await _add(hopping, scope, ANSWER)
    for text in OTHERS:
        last = await _add(hopping, scope, text)
    await assert_eventually(
        lambda: _indexed(hopping, scope, last.fact_id, OTHERS[-1]), timeout_s=30, what="indexed"
    )

    # Without the hop the question finds the bridge first and the answer below the others
    # (it shares none of the question's words); top 2 leaves it out.
    without = await _search(plain, scope, QUESTION)
    assert without[0].fact.fact_id == bridge.fact_id
    assert answer.fact_id not in [r.fact.fact_id for r in await _search(plain, scope, QUESTION, 2)]

    # With it: the question joined to the bridge's text is asked again, and the answer
    # scores weight * (bridge + its score for the joined question) / 2 (the plain server asked the
    # same joined question gives that score: fewer than 10 facts, so no common words and no
    # subjects, and no time intent, so both rankings are the same function).
    joined = await _search(plain, scope, f"{QUESTION} {BRIDGE}")
    again = {r.fact.fact_id: r.score for r in joined}
    found = await _search(hopping, scope, QUESTION)
    scores = {r.fact.fact_id: r.score for r in found}
    assert found[0].fact.fact_id == bridge.fact_id
    assert scores[bridge.fact_id] == pytest.approx(without[0].score)
    hop = WEIGHT * (scores[bridge.fact_id] + again[answer.fact_id]) / 2
    plain_scores = {r.fact.fact_id: r.score for r in without}
    assert hop > plain_scores[answer.fact_id]
    assert scores[answer.fact_id] == pytest.approx(hop)
    assert scores[answer.fact_id] < scores[bridge.fact_id]  # below what led to it
    top2 = await _search(hopping, scope, QUESTION, 2)
    assert [r.fact.fact_id for r in top2] == [bridge.fact_id, answer.fact_id]
    assert len(found) == len({r.fact.version_id for r in found})


def _scored(vid: str, score: float) -> ScoredFact:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    version = FactVersion(
        version_id=vid,
        fact_id=vid,
        text=vid,
        kind=FactKind.OTHER,
        valid_from=at,
        valid_to=None,
        recorded_at=at,
        superseded_at=None,
    )
    return ScoredFact(version, score, score, 0.0)


def test_merge_keeps_the_better_score_and_skips_the_bridge_itself() -> None:
    settings = HopSettings(weight=0.5, bridges=2)
    first = [_scored("a", 0.8), _scored("b", 0.6), _scored("c", 0.1)]
    assert [s.version.version_id for s in bridges(first, settings)] == ["a", "b"]
    assert bridges(first, HopSettings(weight=0.0, bridges=2)) == []
    assert hop_question("Why?", first[0].version) == "Why? a"
    hops = [
        (first[0], [_scored("a", 1.0), _scored("c", 0.9), _scored("d", 0.5)]),
        (first[1], [_scored("d", 0.9), _scored("e", 0.01)]),
    ]
    merged = {s.version.version_id: s.score for s in merge(first, hops, settings, threshold=0.3)}
    assert merged["a"] == 0.8  # its own hop is not counted
    assert merged["c"] == pytest.approx(0.5 * (0.8 + 0.9) / 2)  # better than its direct 0.1
    assert merged["d"] == pytest.approx(max(0.5 * (0.8 + 0.5) / 2, 0.5 * (0.6 + 0.9) / 2))
    assert "e" not in merged  # 0.5 * (0.6 + 0.01) / 2: below the threshold
