"""What the MCP front costs: `search_memory` through graphrag-memory-mcp (stdio and streamable
HTTP, the SDK's own client) against the same two searches sent straight to the gRPC service
(SearchFacts and SearchEpisodes at once, as the tool sends them), beside each transport's floor
(the gRPC health check; an MCP ping), interleaved call by call in one run.

    .venv/bin/python bench/mcp_overhead.py [--facts 200] [--rounds 200] [--json-out PATH]

One server (embedded PostgreSQL) with `--facts` facts in one scope (AddFacts, indexed before
timing), one MCP process per transport on it, one call in flight.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
import httpx
from grpc_health.v1 import health_pb2 as health_pb
from grpc_health.v1 import health_pb2_grpc as health_grpc
from latency import ms_summary
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from recall_texts import questions, scope_facts
from reporting import markdown_table, ratio, write_report
from rpc import Stored, wait_indexed
from serverproc import serving

from memory_client.v1 import memory_pb2 as pb
from memory_client.v1 import memory_pb2_grpc as pb_grpc

USER, GRAPH = "mcp-bench", "Finance"
TOKEN = "mcp-bench-token-0123456789"
MCP = [sys.executable, "-m", "memory_client.mcp_server"]


@asynccontextmanager
async def stdio(target: str) -> AsyncIterator[ClientSession]:
    args = [*MCP[1:], "--target", target, "--user", USER, "--graph", GRAPH]
    params = StdioServerParameters(command=sys.executable, args=args)
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


@asynccontextmanager
async def http(target: str, scratch: Path) -> AsyncIterator[ClientSession]:
    tokens = scratch / "tokens.json"
    tokens.write_text(json.dumps({"callers": [{"token": TOKEN, "user": USER, "graphs": [GRAPH]}]}))
    command = [*MCP, "--transport", "http", "--listen", "127.0.0.1:0", "--target", target]
    process = subprocess.Popen(
        [*command, "--tokens-file", str(tokens)], stderr=subprocess.PIPE, text=True
    )
    try:
        assert process.stderr is not None
        line = await asyncio.to_thread(process.stderr.readline)
        url = line.split("listening on ", 1)[1].strip()
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with (
            httpx.AsyncClient(headers=headers, timeout=60) as client,
            streamable_http_client(url, http_client=client) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session
    finally:
        process.terminate()
        process.wait(20)
        if process.stderr is not None:
            process.stderr.close()


async def seed(stub: pb_grpc.MemoryServiceStub, count: int) -> None:
    texts = scope_facts(0, count)
    facts = [pb.NewFact(text=t) for t in texts]
    reply = await stub.AddFacts(
        pb.AddFactsRequest(username=USER, graphname=GRAPH, facts=facts), timeout=600
    )
    stored = [Stored(USER, GRAPH, t, a.fact_id) for t, a in zip(texts, reply.facts, strict=True)]
    await wait_indexed(stub, stored[-5:], 600)


async def timed(step: Callable[[], Awaitable[object]]) -> float:
    began = time.perf_counter()
    await step()
    return (time.perf_counter() - began) * 1000


async def run(args: argparse.Namespace, target: str, scratch: Path) -> dict[str, Any]:
    async with AsyncExitStack() as stack:
        channel = await stack.enter_async_context(grpc.aio.insecure_channel(target))
        stub, health = pb_grpc.MemoryServiceStub(channel), health_grpc.HealthStub(channel)
        await seed(stub, args.facts)
        by_stdio = await stack.enter_async_context(stdio(target))
        by_http = await stack.enter_async_context(http(target, scratch))
        samples: dict[str, list[float]] = {}

        def grpc_search(q: str) -> Callable[[], Awaitable[object]]:
            facts = pb.SearchFactsRequest(
                username=USER, graphname=GRAPH, query=q, top_k=10, threshold=0.0
            )
            said = pb.SearchEpisodesRequest(
                username=USER, graphname=GRAPH, query=q, top_k=10, threshold=0.0
            )
            return lambda: asyncio.gather(stub.SearchFacts(facts), stub.SearchEpisodes(said))

        def tool(session: ClientSession, q: str) -> Callable[[], Awaitable[object]]:
            async def call() -> None:
                result = await session.call_tool("search_memory", {"query": q, "top_k": 10})
                assert not result.isError and result.structuredContent, result
                assert len(result.structuredContent["facts"]) == 10

            return call

        asked = questions()
        for i in range(args.warmup + args.rounds):
            q = asked[i % len(asked)]
            steps: dict[str, Callable[[], Awaitable[object]]] = {
                "grpc health check": lambda: health.Check(health_pb.HealthCheckRequest()),
                "grpc SearchFacts + SearchEpisodes": grpc_search(q),
                "mcp stdio ping": by_stdio.send_ping,
                "mcp stdio search_memory": tool(by_stdio, q),
                "mcp http ping": by_http.send_ping,
                "mcp http search_memory": tool(by_http, q),
            }
            for name, step in steps.items():
                took = await timed(step)
                if i >= args.warmup:
                    samples.setdefault(name, []).append(took)
    rows = {name: ms_summary(values) for name, values in samples.items()}
    direct = rows["grpc SearchFacts + SearchEpisodes"]["p50_ms"]
    return {
        "rows": rows,
        "ratios_p50": {
            name: ratio(rows[name]["p50_ms"], direct)
            for name in ("mcp stdio search_memory", "mcp http search_memory")
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--facts", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--json-out", type=Path, default=Path("bench/results/mcp_overhead.json"))
    args = parser.parse_args()
    with serving() as server, tempfile.TemporaryDirectory() as scratch:
        result = asyncio.run(run(args, server.address, Path(scratch)))
    columns = ("call", "p50 ms", "p95 ms", "p99 ms", "mean ms")
    table = [
        (name, r["p50_ms"], r["p95_ms"], r["p99_ms"], r["mean_ms"])
        for name, r in result["rows"].items()
    ]
    print(markdown_table(columns, table))
    print("p50 ÷ the same searches over gRPC:", result["ratios_p50"])
    write_report(args.json_out, {"args": vars(args) | {"json_out": str(args.json_out)}, **result})


if __name__ == "__main__":
    main()
