"""What episodes cost a turn (issue 30), read from the server's own metrics: texts embedded per
StartTurn (the question for recall, and each stored message through the outbox), and how long
an ingest of turns takes until the outbox has indexed all of it. Used by bench/recall_turns.py
--episodes-ab, which runs the same phases on a server with episodes and on one without."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Sequence
from typing import Any

import grpc
from locomo_feed import scrape
from recall_load import GRAPH

from memory_client.v1 import memory_pb2 as pb
from memory_client.v1 import memory_pb2_grpc as pb_grpc

EMBEDDED = "graphrag_memory_embedding_batch_size_sum"
# prometheus_client writes a sample's labels sorted by name.
START_TURNS = 'graphrag_memory_rpc_requests_total{code="OK",method="StartTurn"}'
PENDING = "graphrag_memory_outbox_pending"


def counters(url: str) -> tuple[float, float]:
    """(texts embedded so far, StartTurn calls answered OK so far)."""
    values = scrape(url)
    return values.get(EMBEDDED, 0.0), values.get(START_TURNS, 0.0)


def per_turn(before: tuple[float, float], after: tuple[float, float]) -> float | None:
    """Texts embedded per StartTurn between two readings of `counters`."""
    turns = after[1] - before[1]
    return round((after[0] - before[0]) / turns, 3) if turns else None


async def _until_indexed(url: str, timeout_s: float) -> float:
    started = time.monotonic()
    while scrape(url).get(PENDING, 1.0) > 0:
        if time.monotonic() - started > timeout_s:
            raise RuntimeError(f"the outbox still had rows after {timeout_s} s")
        await asyncio.sleep(0.05)
    return time.monotonic() - started


async def ingest(
    address: str, url: str, users: Sequence[str], turns: int, *, timeout_s: float = 300
) -> dict[str, Any]:
    """`turns` turns (StartTurn, then CompleteTurn), one new conversation per user, all users
    at once; the feed's wall time, then how long until the outbox was empty."""
    async with grpc.aio.insecure_channel(address) as channel:
        stub = pb_grpc.MemoryServiceStub(channel)
        # What earlier phases left in the outbox is not this ingest's.
        await _until_indexed(url, timeout_s)
        before = counters(url)
        started = time.monotonic()

        async def chat(user: str) -> None:
            chat = f"ingest-{uuid.uuid4().hex[:8]}"
            for i in range(turns):
                said = await stub.StartTurn(
                    pb.StartTurnRequest(
                        username=user,
                        graphname=GRAPH,
                        conversation_id=chat,
                        content=f"Turn {i}: which ledger holds account {i * 7919 % 10000}?",
                    )
                )
                await stub.CompleteTurn(
                    pb.CompleteTurnRequest(
                        username=user,
                        graphname=GRAPH,
                        conversation_id=chat,
                        content=f"Reply {i}: the ledger of branch {i % 13} holds it.",
                        parent_id=said.message.message_id,
                    )
                )

        await asyncio.gather(*(chat(u) for u in users))
        fed_s = time.monotonic() - started
        indexed_s = await _until_indexed(url, timeout_s)
        after = counters(url)
    return {
        "turns": turns * len(users),
        "feed_s": round(fed_s, 3),
        "indexed_after_feed_s": round(indexed_s, 3),
        "texts_embedded": int(after[0] - before[0]),
    }
