"""The recall benchmark's load driver: one scenario per process, started by recall_turns.py.

Scenarios (N = --concurrency workers, closed loop, one grpc.aio channel, as in loadgen.py):

- `seed`: AddFact --facts facts into each of --scopes scopes, and an earlier conversation of
  --seed-turns turns in each (AppendMessages: the user says one of its facts, the assistant
  acknowledges; with episodes on, a turn's recall then searches them), then wait for the
  vector index (SearchFacts for each scope's last fact until it has a vector_score, then until
  the outbox is empty; the index must then hold every fact's vector).
- `floor`: in this process, no gRPC: embed the question with the server's own EmbeddingPool +
  MiniLMBackend (same batch settings) and run one indexed PostgreSQL query (the worker's scope
  id by its unique (username, graphname) key) on the server's database through an asyncpg
  pool as large as the server's.
- `floor-knn`: the same embedding, then the scope's vector top-50 (PgVectorIndex.search, the
  query recall itself runs), as a reference that includes the 1,000-vector scan.
- `health`: grpc.health.v1.Health/Check (loadgen's floor).
- `recall` / `stm`: StartTurn in a loop on scopes with --facts facts / with none. Worker i
  has its own conversation in scope i mod --scopes, seeded with --seed-turns prior turns.

Events on stdout as in loadgen.py: measure_start, measure_end, then result.
"""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import asyncpg
import grpc
from latency import Recorder
from loadgen import Conversation, DriveOptions, emit, seed
from recall_texts import questions, scope_facts
from rpc import Stored, wait_indexed

from memory_client.v1 import memory_pb2 as pb
from memory_client.v1 import memory_pb2_grpc as pb_grpc
from memory_server.embedding import EmbeddingPool, MiniLMBackend
from memory_server.index.pgvector import PgVectorIndex
from memory_server.memory.identity import Scope
from memory_server.memory.ports import AsOf
from memory_server.memory.recall.rank import is_standing_instruction
from memory_server.memory.recall.search import CANDIDATES_PER_SIGNAL
from memory_server.settings import Settings

GRAPH = "Finance"  # loadgen.Conversation's graph
START = "StartTurn"
INDEX_WAIT_S = 600.0


@dataclass(frozen=True, slots=True)
class RecallOptions:
    target: str
    dsn: str
    scenario: str
    concurrency: int
    duration_s: float
    warmup_s: float
    scopes: int
    facts: int
    seed_turns: int
    tag: str
    # Each question numbered, so none is asked twice (the embedding cache then answers only
    # what a real turn would find in it: the stored message its own recall embedded).
    unique_questions: bool = False


def usernames(tag: str, kind: str, scopes: int) -> list[str]:
    """kind: "facts" (the seeded scopes) or "empty" (the STM-only contrast)."""
    return [f"recall-{kind}-{tag}-{i}" for i in range(scopes)]


async def drive_seed(opts: RecallOptions, channel: grpc.aio.Channel) -> None:
    stub = pb_grpc.MemoryServiceStub(channel)
    users = usernames(opts.tag, "facts", opts.scopes)
    texts = [scope_facts(i, opts.facts) for i in range(opts.scopes)]
    gate = asyncio.Semaphore(32)  # AddFacts in flight, spread over the scopes' actors
    began = time.perf_counter()

    async def add(user: str, text: str) -> None:
        async with gate:
            request = pb.AddFactRequest(username=user, graphname=GRAPH, text=text)
            await stub.AddFact(request, timeout=60)

    # Interleaved by position, so every scope fills at the same pace.
    await asyncio.gather(*(add(users[s], texts[s][k]) for k in range(opts.facts)
                           for s in range(opts.scopes)))  # fmt: skip
    added_s = time.perf_counter() - began
    await asyncio.gather(
        *(earlier_conversation(stub, user, facts[: opts.seed_turns])
          for user, facts in zip(users, texts, strict=True))
    )  # fmt: skip

    last = [Stored(user, GRAPH, facts[-1]) for user, facts in zip(users, texts, strict=True)]
    await wait_indexed(stub, last, INDEX_WAIT_S, poll_s=0.5)
    conn = await asyncpg.connect(opts.dsn)
    try:
        # A scope's last fact indexed does not mean all of them are: the outbox indexes in
        # batches, in no promised order. Wait for it to empty.
        deadline = time.monotonic() + INDEX_WAIT_S
        while (outbox := await conn.fetchval("SELECT count(*) FROM vector_outbox")) and (
            time.monotonic() < deadline
        ):
            await asyncio.sleep(0.5)
        vectors = await conn.fetchval(
            "SELECT count(*) FROM memory_vectors WHERE scope_hash NOT LIKE '%/episodes'"
        )
        episodes = await conn.fetchval(
            "SELECT count(*) FROM memory_vectors WHERE scope_hash LIKE '%/episodes'"
        )
        live = await conn.fetchval(
            "SELECT count(*) FROM fact_versions WHERE superseded_at IS NULL AND valid_to IS NULL"
        )
        # What autovacuum would do soon anyway; done now, so the planner sees the seeded
        # tables the same way in every run.
        await conn.execute("ANALYZE scopes, facts, fact_versions, memory_vectors")
    finally:
        await conn.close()
    expected = opts.scopes * opts.facts
    if outbox or vectors != expected or live != expected:
        raise SystemExit(f"seed incomplete: outbox {outbox}, vectors {vectors}, live {live}")
    emit(
        {
            "event": "result",
            "scenario": "seed",
            "scopes": opts.scopes,
            "facts_per_scope": opts.facts,
            "standing_per_scope": sum(map(is_standing_instruction, texts[0])),
            "add_fact_s": round(added_s, 1),
            "add_fact_per_s": round(expected / added_s, 1),
            "indexed_s": round(time.perf_counter() - began, 1),
            "live_facts": live,
            "vectors": vectors,
            "episode_vectors": episodes,
        }
    )


async def earlier_conversation(stub: pb_grpc.MemoryServiceStub, user: str, said: list[str]) -> None:
    """A conversation before the measured ones: the user states each text, the assistant
    acknowledges it."""
    messages = []
    for text in said:
        messages.append(pb.NewMessage(role=pb.ROLE_USER, content=f"Remember this: {text}."))
        messages.append(pb.NewMessage(role=pb.ROLE_ASSISTANT, content="Noted, I will."))
    request = pb.AppendMessagesRequest(
        username=user, graphname=GRAPH, conversation_id="earlier", messages=messages
    )
    await stub.AppendMessages(request, timeout=60)


async def measure(
    opts: RecallOptions,
    name: str,
    step: Callable[[int, int], Awaitable[None]],
    notes: Callable[[], dict[str, Any]] = dict,
) -> None:
    """N workers each loop `step(worker, i)` for warm-up + window; then the result event."""
    now = time.perf_counter()
    rec = Recorder(now + opts.warmup_s, now + opts.warmup_s + opts.duration_s)

    async def worker(w: int) -> None:
        for i in itertools.count(w):
            if not rec.running():
                return
            began = time.perf_counter()
            try:
                await step(w, i)
            except grpc.aio.AioRpcError as exc:
                rec.record(name, began, time.perf_counter(), exc.code().name)
                continue
            except Exception as exc:  # the floor's embedding or query failing
                rec.record(name, began, time.perf_counter(), type(exc).__name__)
                continue
            rec.record(name, began, time.perf_counter())

    async def markers() -> None:
        await asyncio.sleep(opts.warmup_s)
        emit({"event": "measure_start"})
        await asyncio.sleep(max(0.0, rec.end - time.perf_counter()))
        emit({"event": "measure_end"})

    await asyncio.gather(markers(), *(worker(w) for w in range(opts.concurrency)))
    emit(
        {
            "event": "result",
            "scenario": opts.scenario,
            "concurrency": opts.concurrency,
            "window_s": opts.duration_s,
            "rpcs": rec.summary(),
            "notes": notes(),
        }
    )


async def drive_floor(opts: RecallOptions) -> None:
    """One embedding + one PostgreSQL query, in this process, sized like the server."""
    s = Settings()
    qs = questions()
    users = usernames(opts.tag, "facts", opts.scopes)
    scopes = [Scope(u, GRAPH) for u in users]
    pool = await asyncpg.create_pool(
        opts.dsn, min_size=s.db_pool_min_size, max_size=s.db_pool_max_size
    )
    index = PgVectorIndex(pool, 384)
    backend = MiniLMBackend()
    try:
        # No cache: the phases cycle through 64 questions, so a cache would answer all but the
        # first 64 and the floor would no longer hold an embedding (recall_turns runs the server
        # without one too).
        async with EmbeddingPool(
            backend,
            max_batch=s.embedding_batch_size,
            max_wait_ms=s.embedding_max_wait_ms,
            cache_size=0,
        ) as embedder:
            await embedder.embed(["load the model before the clock starts"])
            await index.search(scopes[0].scope_hash, [0.0] * 383 + [1.0], 1, AsOf())

            async def point(w: int, i: int) -> None:
                await embedder.embed([qs[i % len(qs)]])
                user = users[w % opts.scopes]
                row = await pool.fetchval(
                    "SELECT id FROM scopes WHERE username = $1 AND graphname = $2", user, GRAPH
                )
                assert row is not None, user

            async def knn(w: int, i: int) -> None:
                [vector] = await embedder.embed([qs[i % len(qs)]])
                scope_hash = scopes[w % opts.scopes].scope_hash
                hits = await index.search(scope_hash, vector, CANDIDATES_PER_SIGNAL, AsOf())
                assert len(hits) == min(CANDIDATES_PER_SIGNAL, opts.facts)

            if opts.scenario == "floor":
                await measure(opts, "embed + 1 indexed query", point)
            else:
                await measure(opts, "embed + scope top-50 knn", knn)
    finally:
        await pool.close()


async def drive_turns(opts: RecallOptions, channel: grpc.aio.Channel) -> None:
    stub = pb_grpc.MemoryServiceStub(channel)
    kind = "facts" if opts.scenario == "recall" else "empty"
    users = usernames(opts.tag, kind, opts.scopes)
    convs = [
        Conversation(users[w % opts.scopes], str(uuid.uuid4())) for w in range(opts.concurrency)
    ]
    await seed(channel, convs, opts.seed_turns)
    qs = questions()
    recalled: list[int] = []
    episodes: list[int] = []
    standing: list[int] = []
    tokens: list[int] = []
    degraded = 0

    async def start(w: int, i: int) -> None:
        nonlocal degraded
        conv = convs[w]
        question = qs[i % len(qs)]
        if opts.unique_questions:
            question = f"{question} (asked by worker {w}, turn {i})"
        request = pb.StartTurnRequest(**conv.scope(), content=question)
        reply = await stub.StartTurn(request, timeout=30)
        ltm = reply.context.long_term
        recalled.append(len(ltm.facts))
        episodes.append(len(ltm.episodes))
        standing.append(sum(1 for f in ltm.facts if f.standing))
        tokens.append(reply.context.total_tokens)
        degraded += ltm.degraded

    def notes() -> dict[str, Any]:
        n = max(1, len(recalled))
        return {
            "mean_recalled_facts": round(sum(recalled) / n, 2),
            "mean_recalled_episodes": round(sum(episodes) / n, 2),
            "mean_standing_facts": round(sum(standing) / n, 2),
            "turns_with_relevant_facts": round(
                sum(1 for r, s in zip(recalled, standing, strict=True) if r > s) / n, 3
            ),
            "mean_context_tokens": round(sum(tokens) / max(1, len(tokens))),
            "degraded_turns": degraded,
        }

    await measure(opts, START, start, notes)


async def drive(opts: RecallOptions) -> None:
    if opts.scenario in ("floor", "floor-knn"):
        await drive_floor(opts)
        return
    channel = grpc.aio.insecure_channel(opts.target)
    try:
        await asyncio.wait_for(channel.channel_ready(), 30)
        if opts.scenario == "seed":
            await drive_seed(opts, channel)
        elif opts.scenario in ("recall", "stm"):
            await drive_turns(opts, channel)
        else:
            raise SystemExit(f"unknown scenario {opts.scenario!r}")
    finally:
        await channel.close()


def run(opts: RecallOptions) -> None:
    if opts.scenario == "health":  # loadgen's Health/Check floor
        import loadgen

        health = DriveOptions(
            opts.target, "floor", opts.concurrency, opts.duration_s, opts.warmup_s, 1, 0, 0
        )
        loadgen.run(health)
        return
    asyncio.run(drive(opts))
