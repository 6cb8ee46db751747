"""Where the time goes: py-spy on the server and PostgreSQL's pg_stat_statements, during AddFact
ingest and during StartTurn with long-term recall.

    .venv/bin/python bench/profile_server.py [--scopes 8] [--facts 250] [--concurrency 16] \
        [--bulk N] [--turn-seconds 20] [--json-out bench/results/profile_server.json]

1. **Server**: `serverproc.BenchServer`; once its PostgreSQL is initialised, the bench sets
   `shared_preload_libraries = 'pg_stat_statements'` (the embedded distribution ships it) with
   ALTER SYSTEM, restarts the server on the same data dir and creates the extension.
2. **Ingest**: `--scopes` × `--facts` AddFacts (recall_texts' facts), `--concurrency` in flight,
   until each scope's last fact is in the vector index (`--bulk N`: each scope's facts in
   AddFacts calls of N instead); py-spy records the server (raw, 100
   Hz) for the whole window; pg_stat_statements is reset first and read after.
3. **Turns**: StartTurn on those scopes (each worker its own conversation with 10 prior turns,
   recall_texts' questions), `--concurrency` in flight for `--turn-seconds`, same recording.
4. **Report**: per fact / per turn, ms of server CPU and PostgreSQL CPU (process CPU time over
   the window), the server's py-spy samples by component (the innermost frame that names
   one, see COMPONENTS), and the statements with calls per fact / turn, mean and total ms.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
import grpc
from loadgen import Conversation, seed
from recall_texts import questions, scope_facts
from recall_turns import PY_SPY
from reporting import write_report
from rpc import Stored, wait_indexed
from serverproc import BenchServer, serving

from memory_client.v1 import memory_pb2 as pb
from memory_client.v1 import memory_pb2_grpc as pb_grpc

GRAPH = "Finance"  # loadgen.Conversation's graph

# (component, pattern on "function (file:line)"), innermost match wins; order breaks ties
# within one frame only.
COMPONENTS: list[tuple[str, re.Pattern[str]]] = [
    ("embedding: onnxruntime run", re.compile(r"onnxruntime")),
    ("embedding: tokenizer + pooling", re.compile(r"embedding/minilm\.py")),
    ("embedding: pool", re.compile(r"embedding/pool\.py")),
    ("asyncpg (protocol, codecs, pool)", re.compile(r"asyncpg/")),
    ("grpc (aio server, HTTP/2)", re.compile(r"grpc/|grpc_|_cython")),
    ("protobuf", re.compile(r"google/protobuf")),
    ("tokens (tiktoken)", re.compile(r"tiktoken|memory_server/tokens\.py")),
    ("secrets scan", re.compile(r"detect_secrets|secrets")),
    ("store: facts", re.compile(r"store/facts/")),
    ("store: conversations", re.compile(r"store/conversations/")),
    ("outbox", re.compile(r"memory_server/outbox/")),
    ("index: pgvector", re.compile(r"index/pgvector\.py")),
    ("memory: recall + ltm", re.compile(r"memory/(recall|ltm|reconcile)")),
    ("memory: stm + turns", re.compile(r"memory/")),
    ("actors", re.compile(r"memory_server/actors/")),
    ("api edge", re.compile(r"memory_server/api/|metrics\.py")),
    # asyncpg's sends are socket writes on the loop (send(2) is where its time shows).
    ("wake-ups from the embedding thread", re.compile(r"_write_to_self")),
    ("socket writes (asyncio transports)", re.compile(r"^\s*write \(asyncio/selector_events")),
    # Includes grpc's Cython callbacks, which py-spy shows as the loop's own frame.
    ("asyncio event loop", re.compile(r"asyncio/|uvloop")),
    ("threading / executor", re.compile(r"threading\.py|concurrent/futures")),
]


def classify(stack: str) -> str:
    for frame in reversed(stack.split(";")):
        for name, pattern in COMPONENTS:
            if pattern.search(frame):
                return name
    return "other"


def spy_breakdown(path: Path) -> dict[str, Any]:
    by: collections.Counter[str] = collections.Counter()
    total = 0
    if path.exists():
        for line in path.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            if not count.isdigit():
                continue
            by[classify(stack)] += int(count)
            total += int(count)
    return {"samples": total, "share": {k: round(v / total, 3) for k, v in by.most_common()}}


async def statements(dsn: str, reset: bool) -> list[dict[str, Any]]:
    conn = await asyncpg.connect(dsn)
    try:
        if reset:
            await conn.execute("SELECT pg_stat_statements_reset()")
            return []
        rows = await conn.fetch(
            """SELECT calls, total_exec_time, mean_exec_time, rows,
                      regexp_replace(query, '\\s+', ' ', 'g') AS query
               FROM pg_stat_statements
               WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
                 AND query NOT ILIKE '%pg_stat_statements%'
               ORDER BY total_exec_time DESC LIMIT 25"""
        )
        return [dict(r) for r in rows]
    finally:
        await conn.close()


def spy(server: BenchServer, out: Path) -> subprocess.Popen[bytes]:
    """Records until SIGINT (py-spy then writes its file)."""
    assert server.process is not None
    command = [str(PY_SPY), "record", "--pid", str(server.process.pid), "--rate", "100"]
    command += ["--format", "raw", "--nonblocking"]
    command += ["--output", str(out)]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def ingest(
    stub: pb_grpc.MemoryServiceStub, users: list[str], args: argparse.Namespace
) -> None:
    texts = [scope_facts(100 + i, args.facts) for i in range(len(users))]
    gate = asyncio.Semaphore(args.concurrency)

    async def add(user: str, text: str) -> None:
        async with gate:
            await stub.AddFact(
                pb.AddFactRequest(username=user, graphname=GRAPH, text=text), timeout=120
            )

    async def add_many(user: str, facts: list[str]) -> None:
        async with gate:
            for i in range(0, len(facts), args.bulk):
                chunk = [pb.NewFact(text=t) for t in facts[i : i + args.bulk]]
                await stub.AddFacts(
                    pb.AddFactsRequest(username=user, graphname=GRAPH, facts=chunk), timeout=120
                )

    if args.bulk:  # each scope's facts in AddFacts calls of --bulk, scopes side by side
        await asyncio.gather(*(add_many(u, t) for u, t in zip(users, texts, strict=True)))
    else:
        await asyncio.gather(*(add(users[s], texts[s][k]) for k in range(args.facts)
                               for s in range(len(users))))  # fmt: skip
    last = [Stored(user, GRAPH, facts[-1]) for user, facts in zip(users, texts, strict=True)]
    await wait_indexed(stub, last, timeout_s=600, poll_s=0.1)


async def turns(
    channel: grpc.aio.Channel, convs: list[Conversation], args: argparse.Namespace
) -> tuple[int, float]:
    """StartTurns for --turn-seconds; answers (turns, mean facts recalled per turn)."""
    stub = pb_grpc.MemoryServiceStub(channel)
    qs = questions()
    done = 0
    recalled = 0
    deadline = time.monotonic() + args.turn_seconds

    async def worker(conv: Conversation, w: int) -> None:
        nonlocal done, recalled
        i = w
        while time.monotonic() < deadline:
            request = pb.StartTurnRequest(**conv.scope(), content=qs[i % len(qs)])
            reply = await stub.StartTurn(request, timeout=60)
            recalled += len(reply.context.long_term.facts)
            done += 1
            i += 1

    await asyncio.gather(*(worker(c, w) for w, c in enumerate(convs)))
    return done, recalled / max(1, done)


async def phase(
    name: str,
    server: BenchServer,
    dsn: str,
    args: argparse.Namespace,
    work: Callable[[], Awaitable[int]],
) -> dict[str, Any]:
    await statements(dsn, reset=True)
    out = args.profile_dir / f"server-{name}.txt"
    cpu0 = server.cpu_seconds()
    began = time.perf_counter()
    recorder = spy(server, out)
    units = await work()
    seconds = time.perf_counter() - began
    cpu1 = server.cpu_seconds()
    recorder.send_signal(signal.SIGINT)
    recorder.wait(120)
    rows = await statements(dsn, reset=False)
    return {
        "phase": name,
        "units": units,
        "seconds": round(seconds, 2),
        "per_s": round(units / seconds, 1),
        "server_cpu_ms_per_unit": round(1000 * (cpu1["server"] - cpu0["server"]) / units, 2),
        "postgres_cpu_ms_per_unit": round(1000 * (cpu1["postgres"] - cpu0["postgres"]) / units, 2),
        "py_spy": spy_breakdown(out),
        "statements": [
            {
                "calls_per_unit": round(r["calls"] / units, 2),
                "mean_ms": round(r["mean_exec_time"], 3),
                "total_ms_per_unit": round(r["total_exec_time"] / units, 3),
                "query": r["query"][:160],
            }
            for r in rows
        ],
    }


async def run(server: BenchServer, args: argparse.Namespace) -> list[dict[str, Any]]:
    dsn = server.dsn()
    conn = await asyncpg.connect(dsn)
    await conn.execute("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'")
    await conn.close()
    server.restart()  # ALTER SYSTEM takes effect at a restart
    dsn = server.dsn()
    conn = await asyncpg.connect(dsn)
    await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    await conn.close()
    users = [f"profile-{i}" for i in range(args.scopes)]
    results = []
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.MemoryServiceStub(channel)
        # One fact first, so that the model load and the vector table are not in the window.
        await stub.AddFact(pb.AddFactRequest(username="profile-warm", graphname=GRAPH, text="warm"))

        async def do_ingest() -> int:
            await ingest(stub, users, args)
            return int(args.scopes * args.facts)

        results.append(await phase("ingest", server, dsn, args, do_ingest))
        print(json.dumps(results[-1])[:400], flush=True)

        convs = [
            Conversation(users[w % len(users)], str(uuid.uuid4())) for w in range(args.concurrency)
        ]
        await seed(channel, convs, 10)  # the prior turns are not in the window
        mean_recalled = 0.0

        async def do_turns() -> int:
            nonlocal mean_recalled
            done, mean_recalled = await turns(channel, convs, args)
            return done

        results.append(await phase("turns", server, dsn, args, do_turns))
        results[-1]["mean_recalled_facts"] = round(mean_recalled, 2)
        print(json.dumps(results[-1])[:400], flush=True)
    return results


def report(results: list[dict[str, Any]]) -> None:
    for r in results:
        unit = "fact" if r["phase"] == "ingest" else "turn"
        print(
            f"\n## {r['phase']}: {r['units']} {unit}s in {r['seconds']} s ({r['per_s']}/s); "
            f"server CPU {r['server_cpu_ms_per_unit']} ms/{unit}, PostgreSQL CPU "
            f"{r['postgres_cpu_ms_per_unit']} ms/{unit}"
        )
        print(f"\n| server component (py-spy, {r['py_spy']['samples']} samples) | share |")
        print("|---|---|")
        for name, share in r["py_spy"]["share"].items():
            print(f"| {name} | {100 * share:.1f} % |")
        print(f"\n| statement | calls/{unit} | mean ms | ms/{unit} |")
        print("|---|---|---|---|")
        for s in r["statements"][:15]:
            query = s["query"].replace("|", "\\|")[:110]
            print(
                f"| `{query}` | {s['calls_per_unit']} | {s['mean_ms']} | {s['total_ms_per_unit']} |"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scopes", type=int, default=8)
    parser.add_argument("--facts", type=int, default=250)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--bulk", type=int, default=0, help="ingest through AddFacts, N per call")
    parser.add_argument("--turn-seconds", type=float, default=20.0)
    parser.add_argument("--profile-dir", type=Path, default=Path("bench/results/profile"))
    parser.add_argument("--json-out", type=Path, default=Path("bench/results/profile_server.json"))
    args = parser.parse_args()
    args.profile_dir.mkdir(parents=True, exist_ok=True)
    with serving([f"--max-facts-per-scope={args.facts + 10}"]) as server:
        results = asyncio.run(run(server, args))
    write_report(args.json_out, {"phases": results, "server_problems": server.problems})
    report(results)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
