"""What the benchmarks do through the service's gRPC client again and again: calls bounded in
flight, timestamps, and waiting until the vector index holds a fact."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from google.protobuf.timestamp_pb2 import Timestamp
from grpc_health.v1 import health_pb2 as health_pb
from grpc_health.v1 import health_pb2_grpc as health_grpc

from memory_client.v1 import memory_pb2 as pb
from memory_client.v1 import memory_pb2_grpc as pb_grpc

T = TypeVar("T")
# SearchFacts' largest top_k: at least the 50 + 50 candidates the server fuses, so ties in the
# fused score cannot hide a fact.
PROBE_TOP_K = 100


async def bounded(
    items: Iterable[T], concurrency: int, call: Callable[[T], Awaitable[None]]
) -> None:
    """Runs `call` on every item in order with at most `concurrency` in flight; the first error
    cancels the rest."""
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


def timestamp(moment: datetime) -> Timestamp:
    ts = Timestamp()
    ts.FromDatetime(moment)
    return ts


@dataclass(frozen=True, slots=True)
class Stored:
    """A fact as AddFact stored it; `fact_id` "" when only its text is known."""

    username: str
    graphname: str
    text: str
    fact_id: str = ""

    def found_in(self, response: pb.SearchFactsResponse) -> bool:
        """Among the results with a vector score (a lexical-only hit has 0)."""
        return any(
            r.vector_score > 0
            and (r.fact.fact_id == self.fact_id if self.fact_id else r.fact.text == self.text)
            for r in response.results
        )


async def is_indexed(stub: pb_grpc.MemoryServiceStub, fact: Stored) -> bool:
    """Whether the vector index holds the fact: searched by its own text, it comes back with a
    vector score. Not ~1: recall embeds the question without the scope's common words
    (memory.recall.common_words), so a fact's own text is not quite its vector."""
    request = pb.SearchFactsRequest(
        username=fact.username,
        graphname=fact.graphname,
        query=fact.text,
        top_k=PROBE_TOP_K,
        threshold=0.0,
    )
    return fact.found_in(await stub.SearchFacts(request, timeout=60))


async def wait_indexed(
    stub: pb_grpc.MemoryServiceStub,
    facts: Iterable[Stored],
    timeout_s: float,
    poll_s: float = 0.25,
) -> float:
    """Polls until the vector index holds every fact; answers the seconds it took.
    RuntimeError when `timeout_s` runs out first."""
    started = time.monotonic()
    waiting = list(facts)
    while waiting:
        waiting = [fact for fact in waiting if not await is_indexed(stub, fact)]
        if waiting:
            if time.monotonic() - started > timeout_s:
                raise RuntimeError(f"the vector index did not catch up within {timeout_s} s")
            await asyncio.sleep(poll_s)
    return time.monotonic() - started


async def search_and_floor(
    stub: pb_grpc.MemoryServiceStub,
    health: health_grpc.HealthStub,
    username: str,
    graphname: str,
    question: str,
) -> tuple[float, float]:
    """One SearchFacts (top 10, threshold 0) and right after it one health check on the same
    server, each timed in ms: an A/B's call and its floor, on the machine as it is then."""
    request = pb.SearchFactsRequest(
        username=username, graphname=graphname, query=question, top_k=10, threshold=0.0
    )
    began = time.perf_counter()
    reply = await stub.SearchFacts(request, timeout=60)
    searched = (time.perf_counter() - began) * 1000
    assert len(reply.results) == 10, len(reply.results)
    began = time.perf_counter()
    await health.Check(health_pb.HealthCheckRequest(), timeout=60)
    return searched, (time.perf_counter() - began) * 1000
