"""Issue 17: texts the embedding backend runs with the pool's cache off (0) and on (2048), in one
run: AddFact ingest until indexed, then 80 learning turns (StartTurn + CompleteTurn stating a
fact: recall, offline extraction, the similarity reconciler, the outbox), then the model's own
batched rate as the floor. Backend texts come from the server's embedding_batch_size metric.

    .venv/bin/python bench/embed_once.py [--scopes 4] [--facts 150] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import socket
import time
import urllib.request
import uuid
from typing import Any

import grpc
from loadgen import ConversationFields
from profile_server import GRAPH, ingest
from recall_texts import scope_facts
from serverproc import serving

from memory_client.v1 import memory_pb2 as pb
from memory_client.v1 import memory_pb2_grpc as pb_grpc
from memory_server.embedding import MiniLMBackend

HOBBIES = [
    "chess", "climbing", "pottery", "jazz piano", "sailing", "birdwatching", "baking", "cycling",
    "knitting", "astronomy",
]  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def embedded(addr: str) -> float:
    """The texts the server's embedding backend has run so far (its batch-size histogram)."""
    with urllib.request.urlopen(f"http://{addr}/metrics") as response:
        text = response.read().decode()
    m = re.search(r"^\S*embedding_batch_size\S*_sum\S* (\S+)$", text, re.M)
    return float(m.group(1)) if m else -1.0


async def learn_phase(stub: pb_grpc.MemoryServiceStub, cache: int, maddr: str) -> dict[str, float]:
    """Turns whose user messages state facts: extraction, the similarity reconciler, the outbox."""
    before = embedded(maddr)
    t = time.perf_counter()

    async def user(u: int) -> None:
        for k, hobby in enumerate(HOBBIES):
            text = f"I really enjoy {hobby} on weekends with friend number {u * 10 + k}."
            scope: ConversationFields = {
                "username": f"learn{cache}-{u}",
                "graphname": GRAPH,
                "conversation_id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{cache}-{u}")),
            }
            started = await stub.StartTurn(pb.StartTurnRequest(**scope, content=text), timeout=60)
            await stub.CompleteTurn(
                pb.CompleteTurnRequest(
                    **scope, content="Noted.", model="bench", parent_id=started.message.message_id
                ),
                timeout=60,
            )

    await asyncio.gather(*(user(u) for u in range(8)))
    last, still = -1.0, 0
    while still < 10:  # until the backend has been idle 1 s
        await asyncio.sleep(0.1)
        now = embedded(maddr)
        still = still + 1 if now == last else 0
        last = now
    return {
        "learn_turns": 80,
        "learn_s": time.perf_counter() - t - 1.0,
        "learn_backend_texts": last - before,
    }


async def one(cache: int, args: argparse.Namespace) -> dict[str, Any]:
    maddr = f"127.0.0.1:{free_port()}"
    with serving(["--embedding-cache-size", str(cache), "--metrics-address", maddr]) as server:
        async with grpc.aio.insecure_channel(server.address) as ch:
            stub = pb_grpc.MemoryServiceStub(ch)
            await stub.AddFact(pb.AddFactRequest(username="w", graphname=GRAPH, text="warm"))
            before = embedded(maddr)
            users = [f"c{cache}-{i}" for i in range(args.scopes)]
            t = time.perf_counter()
            await ingest(stub, users, args)
            dt = time.perf_counter() - t
            n = args.scopes * args.facts
            texts = embedded(maddr) - before
            learn = await learn_phase(stub, cache, maddr)
    return {
        **learn,
        "cache": cache,
        "facts": n,
        "s": dt,
        "facts_per_s": n / dt,
        "backend_texts": texts,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scopes", type=int, default=4)
    p.add_argument("--facts", type=int, default=150)
    p.add_argument("--concurrency", type=int, default=16)
    args = p.parse_args()
    args.bulk = 0  # profile_server.ingest: AddFact, one fact per call
    for cache in (0, 2048, 0, 2048):
        print(asyncio.run(one(cache, args)), flush=True)
    b = MiniLMBackend()
    b.load()
    texts = [t for i in range(args.scopes) for t in scope_facts(100 + i, args.facts)]
    t = time.perf_counter()
    for k in range(0, len(texts), 32):
        b.embed_batch(texts[k : k + 32])
    dt = time.perf_counter() - t
    print({"floor_texts_per_s": len(texts) / dt, "texts": len(texts)}, flush=True)


if __name__ == "__main__":
    main()
