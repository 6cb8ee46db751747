"""bench/locomo_links.py scores the turns the server ranks: its read phase against a stand-in
SearchFacts that answers fixed rankings, on two made-up questions (no LoCoMo file, no server).
It used to score the hits themselves, not their turns, and reported link recall 0."""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import grpc
import pytest

from memory_client.v1 import memory_pb2 as pb
from memory_client.v1 import memory_pb2_grpc as pb_grpc

BENCH = Path(__file__).resolve().parents[1] / "bench"
SAID = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
# Per question, the fact ids SearchFacts answers, best first; fact k is turn D1:k.
RANKED = {
    "Where did Caroline go?": ["f2", "f1", "f3"],  # its evidence, D1:2, first
    "What did Melanie paint?": ["f4", *(f"f{k}" for k in range(6, 16)), "f5"],  # D1:5 at 12th
}


class Rankings(pb_grpc.MemoryServiceServicer):
    def __init__(self) -> None:
        self.asked: list[pb.SearchFactsRequest] = []

    async def SearchFacts(  # noqa: N802 (the generated servicer's name)
        self, request: pb.SearchFactsRequest, context: Any
    ) -> pb.SearchFactsResponse:
        self.asked.append(request)
        results = [
            pb.ScoredFact(
                fact=pb.Fact(fact_id=fid, version_id=f"v-{fid}", text=fid, kind="other"),
                score=1.0 - rank / 100,
            )
            for rank, fid in enumerate(RANKED[request.query][: request.top_k])
        ]
        return pb.SearchFactsResponse(results=results)


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """bench/locomo_links.py, imported as the bench runs it (its folder on sys.path)."""
    monkeypatch.syspath_prepend(str(BENCH))
    return importlib.import_module("locomo_links")


@pytest.fixture
async def rankings() -> AsyncIterator[tuple[str, Rankings]]:
    servicer = Rankings()
    server = grpc.aio.server()
    pb_grpc.add_MemoryServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield f"127.0.0.1:{port}", servicer
    finally:
        await server.stop(None)


async def test_link_recall_counts_the_evidence_turns_in_the_servers_top_10(
    bench: ModuleType, rankings: tuple[str, Rankings]
) -> None:
    locomo_data = importlib.import_module("locomo_data")
    turns = [locomo_data.Turn(f"D1:{k}", "Caroline", f"turn {k}", "", SAID) for k in range(1, 16)]
    questions = [
        locomo_data.Question(0, "Where did Caroline go?", 4, frozenset({"D1:2"})),
        locomo_data.Question(1, "What did Melanie paint?", 1, frozenset({"D1:4", "D1:5"})),
    ]
    conversation = locomo_data.Conversation("conv-1", turns, questions, 0, [])
    fact_to_turn = {"conv-1": {f"f{k}": f"D1:{k}" for k in range(1, 16)}}
    address, servicer = rankings

    got = await bench.read_phase(address, [conversation], fact_to_turn, SAID)

    # The first question's one evidence turn is ranked first; the second's two are 1st and
    # 12th, so half of them are in its top 10.
    assert got["_per_question"] == [100.0, 50.0]
    assert got["recall"]["all"]["R@1"] == 75.0
    assert got["recall"]["all"]["R@10"] == 75.0
    assert got["recall"]["all"]["R@20"] == 100.0
    assert got["R@10_as_of"] == 75.0
    assert got["as_of_rankings_differ"] == 0
    assert len(servicer.asked) == 4  # each question plain and as of the ingest
    assert {r.username for r in servicer.asked} == {"locomo-conv-1"}
