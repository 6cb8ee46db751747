"""mem0 side by side, in one run: mem0 `add(infer=False)` vs our `AddFact`, and mem0 `search`
vs our `SearchFacts`, on the same LoCoMo turns, questions, embedder and machine.

    .venv/bin/python bench/mem0_side_by_side.py [--data PATH] [--limit-conversations N] \
        [--limit-turns N] [--limit-questions N] [--concurrency 16] [--bulk N] \
        [--json-out bench/results/mem0_side_by_side.json]

- **Data**: LoCoMo's dev split read in place (`locomo_data.load`), every turn as one fact
  ("Speaker: text", as `locomo_recall.py` stores it), one scope / mem0 user per conversation;
  the questions are those `locomo_recall.py` asks (categories 1–4 with evidence).
- **Embedder**: our offline all-MiniLM-L6-v2 int8 (`MiniLMBackend`, 2 intra-op threads), in
  the server through its `EmbeddingPool`, and in mem0 through mem0's `EmbeddingBase` (mem0
  embeds one text per `add`; its `embed_batch` is the model's batch call).
- **mem0's store**: what mem0 uses offline by default, local qdrant (here on disk in a temp
  dir, `on_disk=True`, since our side also persists every fact), and its SQLite history in the
  same temp dir. Both sides keep their data durable, and both are the configuration a user
  gets without running another server. mem0 on pgvector in our database was not measured
  (mem0's pgvector store needs psycopg, which is not a dependency here).
- **Ingest**: ours is `AddFact` with `--concurrency` calls in flight (conversations
  interleaved, dialogue order within each, as `locomo_recall.ingest` does), timed until every
  call returned (acked) and until each scope's last fact is in the vector index (indexed: our
  outbox indexes after the commit). mem0's is `add(infer=False)` in one thread, one turn per
  call, in the same order (its local qdrant is not thread-safe); a fact is searchable when
  `add` returns. With `--bulk N` ours is `AddFacts`, N turns per call, each conversation's
  calls in order and up to `--concurrency` conversations at once. Floor, same run: the model
  alone embedding the first `--floor-texts` of the same texts in batches of 32.
- **Search**: one call in flight, top_k 10, threshold 0 on our side, mem0's default threshold
  off (`threshold=0`), every question once per side after 5 warm-up calls. Recall@10 of the
  evidence turns is printed beside it, to show both searched the same data.
- The order is: floor, ours ingest, mem0 ingest, ours search, mem0 search, floor again; the
  server is idle while mem0 runs. The machine is shared: read the ratios, not the absolutes.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import grpc
from latency import ms_summary
from locomo_data import DEFAULT_DATA, Conversation, Turn, load
from locomo_recall import GRAPHNAME, username
from reporting import write_report
from rpc import Stored, bounded, wait_indexed
from serverproc import serving

from memory_client.v1 import memory_pb2 as pb
from memory_client.v1 import memory_pb2_grpc as pb_grpc
from memory_server.embedding import MiniLMBackend
from memory_server.extraction.mem0_runtime import load_mem0

TOP_K = 10


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=DEFAULT_DATA)
    p.add_argument("--limit-conversations", type=int)
    p.add_argument("--limit-turns", type=int, help="first N turns of each conversation")
    p.add_argument("--limit-questions", type=int, help="first N questions of each conversation")
    p.add_argument("--concurrency", type=int, default=16, help="AddFact calls in flight (ours)")
    p.add_argument(
        "--bulk",
        type=int,
        default=0,
        help="ours through AddFacts, this many facts per call (0: AddFact, one per call); "
        "--concurrency conversations in flight",
    )
    p.add_argument("--warmup", type=int, default=5, help="unmeasured searches per side")
    p.add_argument("--floor-texts", type=int, default=640, help="texts the model floor embeds")
    p.add_argument("--json-out", type=Path, default=Path("bench/results/mem0_side_by_side.json"))
    return p.parse_args(argv)


def select(args: argparse.Namespace) -> list[Conversation]:
    out = []
    for c in load(args.data, args.limit_conversations):
        turns = c.turns[: args.limit_turns] if args.limit_turns else c.turns
        ids = {t.dia_id for t in turns}
        asked = [q for q in c.questions if q.evidence & ids]
        if args.limit_questions:
            asked = asked[: args.limit_questions]
        out.append(
            Conversation(c.sample_id, turns, asked, c.skipped_no_evidence, c.dropped_evidence_ids)
        )
    return out


def latency_stats(ms: list[float]) -> dict[str, float | None]:
    return {"calls": len(ms), **ms_summary(ms)}


def recall_at_k(
    conversations: Sequence[Conversation], found: dict[tuple[str, int], list[str]]
) -> float:
    """Mean share of evidence turns among the top k (found: (sample, question) -> dia_ids)."""
    shares = [
        len(q.evidence & set(found[(c.sample_id, q.index)][:TOP_K])) / len(q.evidence)
        for c in conversations
        for q in c.questions
    ]
    return round(100 * statistics.mean(shares), 1) if shares else float("nan")


def model_floor(texts: list[str]) -> float:
    """The embedder's own batched rate: texts/s in batches of 32 on one backend."""
    backend = MiniLMBackend()
    backend.load()
    backend.embed_batch(texts[:32])
    began = time.perf_counter()
    for i in range(0, len(texts), 32):
        backend.embed_batch(texts[i : i + 32])
    seconds = time.perf_counter() - began
    backend.close()
    return len(texts) / seconds


def question_floor(questions: list[str]) -> float:
    """p50 ms of embedding one question alone on the backend: the part of any search with
    this embedder that neither side can skip."""
    backend = MiniLMBackend()
    backend.load()
    backend.embed_batch(questions[:4])
    ms = []
    for question in questions:
        began = time.perf_counter()
        backend.embed_batch([question])
        ms.append((time.perf_counter() - began) * 1000)
    backend.close()
    return statistics.median(ms)


# --- ours ------------------------------------------------------------------------------------


def stored(conversation: Conversation, turn: Turn, fact_id: str) -> Stored:
    return Stored(username(conversation.sample_id), GRAPHNAME, turn.memory_text, fact_id)


async def ours_ingest(
    stub: pb_grpc.MemoryServiceStub,
    conversations: Sequence[Conversation],
    concurrency: int,
    bulk: int = 0,
) -> tuple[dict[str, Any], dict[str, dict[str, str]]]:
    longest = max(len(c.turns) for c in conversations)
    jobs = [(c, c.turns[i]) for i in range(longest) for c in conversations if i < len(c.turns)]
    fact_to_turn: dict[str, dict[str, str]] = {c.sample_id: {} for c in conversations}
    last: dict[str, Stored] = {}
    began = time.perf_counter()

    async def add(job: tuple[Conversation, Turn]) -> None:
        conversation, turn = job
        reply = await stub.AddFact(
            pb.AddFactRequest(
                username=username(conversation.sample_id),
                graphname=GRAPHNAME,
                text=turn.memory_text,
                kind="other",
            ),
            timeout=120,
        )
        fact_to_turn[conversation.sample_id][reply.fact.fact_id] = turn.dia_id
        last[conversation.sample_id] = stored(conversation, turn, reply.fact.fact_id)

    async def add_many(job: tuple[Conversation, list[Turn]]) -> None:
        conversation, turns = job
        reply = await stub.AddFacts(
            pb.AddFactsRequest(
                username=username(conversation.sample_id),
                graphname=GRAPHNAME,
                facts=[pb.NewFact(text=t.memory_text, kind="other") for t in turns],
            ),
            timeout=120,
        )
        for turn, added in zip(turns, reply.facts, strict=True):
            fact_to_turn[conversation.sample_id][added.fact_id] = turn.dia_id
        last[conversation.sample_id] = stored(conversation, turns[-1], reply.facts[-1].fact_id)

    if bulk:
        # Each conversation's turns in calls of `bulk`, in dialogue order; calls of different
        # conversations in flight together (one conversation's calls one after another).
        calls = [
            [(c, c.turns[i : i + bulk]) for i in range(0, len(c.turns), bulk)]
            for c in conversations
        ]

        async def one_conversation(calls: list[tuple[Conversation, list[Turn]]]) -> None:
            for call in calls:
                await add_many(call)

        await bounded(calls, concurrency, one_conversation)
    else:
        await bounded(jobs, concurrency, add)
    acked_s = time.perf_counter() - began
    await wait_indexed(stub, last.values(), timeout_s=600, poll_s=0.1)
    indexed_s = time.perf_counter() - began
    n = len(jobs)
    return {
        "facts": n,
        "concurrency": concurrency,
        "rpc": f"AddFacts ({bulk} per call)" if bulk else "AddFact",
        "acked_s": round(acked_s, 2),
        "acked_per_s": round(n / acked_s, 1),
        "indexed_s": round(indexed_s, 2),
        "indexed_per_s": round(n / indexed_s, 1),
    }, fact_to_turn


async def ours_search(
    stub: pb_grpc.MemoryServiceStub,
    conversations: Sequence[Conversation],
    fact_to_turn: dict[str, dict[str, str]],
    warmup: int,
) -> tuple[dict[str, Any], float]:
    asked = [(c, q) for c in conversations for q in c.questions]
    found: dict[tuple[str, int], list[str]] = {}
    ms: list[float] = []
    for i, (c, q) in enumerate([*asked[:warmup], *asked]):
        request = pb.SearchFactsRequest(
            username=username(c.sample_id),
            graphname=GRAPHNAME,
            query=q.text,
            top_k=TOP_K,
            threshold=0.0,
        )
        began = time.perf_counter()
        reply = await stub.SearchFacts(request, timeout=60)
        took = (time.perf_counter() - began) * 1000
        if i >= warmup:
            ms.append(took)
            found[(c.sample_id, q.index)] = [
                fact_to_turn[c.sample_id][r.fact.fact_id] for r in reply.results
            ]
    return latency_stats(ms), recall_at_k(conversations, found)


# --- mem0 ------------------------------------------------------------------------------------


def mem0_memory(workdir: Path) -> Any:
    """mem0's own `Memory` on local qdrant + SQLite in `workdir`, with our embedder."""
    load_mem0()  # telemetry off, no spaCy download, quiet logger (memory_server's adapter)
    from mem0 import Memory  # type: ignore[import-untyped]
    from mem0.configs.base import MemoryConfig  # type: ignore[import-untyped]
    from mem0.embeddings.base import EmbeddingBase  # type: ignore[import-untyped]

    class OurEmbedder(EmbeddingBase):  # type: ignore[misc]
        """The server's MiniLM backend behind mem0's embedder interface."""

        def __init__(self) -> None:
            super().__init__()
            self.config.embedding_dims = 384
            self.backend = MiniLMBackend()
            self.backend.load()

        def embed(self, text: Any, memory_action: Any = None) -> list[float]:
            [vector] = self.backend.embed_batch([text])
            return vector

        def embed_batch(self, texts: Any, memory_action: Any = "add") -> list[list[float]]:
            return self.backend.embed_batch(list(texts))

    config = MemoryConfig(
        vector_store={
            "provider": "qdrant",
            "config": {
                "path": str(workdir / "qdrant"),
                "on_disk": True,
                "collection_name": "locomo",
                "embedding_model_dims": 384,
            },
        },
        # Constructed, never called: add(infer=False) and search make no LLM or API call.
        embedder={"provider": "openai", "config": {"api_key": "unused", "embedding_dims": 384}},
        llm={"provider": "openai", "config": {"api_key": "unused"}},
        history_db_path=str(workdir / "history.db"),
    )
    memory = Memory(config)
    memory.embedding_model = OurEmbedder()
    return memory


def mem0_ingest(
    memory: Any, conversations: Sequence[Conversation]
) -> tuple[dict[str, Any], dict[str, dict[str, str]]]:
    longest = max(len(c.turns) for c in conversations)
    jobs = [(c, c.turns[i]) for i in range(longest) for c in conversations if i < len(c.turns)]
    memory_to_turn: dict[str, dict[str, str]] = {c.sample_id: {} for c in conversations}
    began = time.perf_counter()
    for c, turn in jobs:
        out = memory.add(
            [{"role": "user", "content": turn.memory_text}],
            user_id=username(c.sample_id),
            infer=False,
        )
        [result] = out["results"]
        memory_to_turn[c.sample_id][result["id"]] = turn.dia_id
    seconds = time.perf_counter() - began
    return {
        "facts": len(jobs),
        "concurrency": 1,
        "seconds": round(seconds, 2),
        "per_s": round(len(jobs) / seconds, 1),
    }, memory_to_turn


def mem0_search(
    memory: Any,
    conversations: Sequence[Conversation],
    memory_to_turn: dict[str, dict[str, str]],
    warmup: int,
) -> tuple[dict[str, Any], float]:
    asked = [(c, q) for c in conversations for q in c.questions]
    found: dict[tuple[str, int], list[str]] = {}
    ms: list[float] = []
    for i, (c, q) in enumerate([*asked[:warmup], *asked]):
        began = time.perf_counter()
        out = memory.search(
            q.text, top_k=TOP_K, filters={"user_id": username(c.sample_id)}, threshold=0.0
        )
        took = (time.perf_counter() - began) * 1000
        if i >= warmup:
            ms.append(took)
            found[(c.sample_id, q.index)] = [
                memory_to_turn[c.sample_id][r["id"]] for r in out["results"]
            ]
    return latency_stats(ms), recall_at_k(conversations, found)


# --- the run ---------------------------------------------------------------------------------


async def ours(
    address: str, conversations: Sequence[Conversation], args: argparse.Namespace
) -> tuple[dict[str, Any], dict[str, dict[str, str]]]:
    async with grpc.aio.insecure_channel(address) as channel:
        return await ours_ingest(
            pb_grpc.MemoryServiceStub(channel), conversations, args.concurrency, args.bulk
        )


async def ours_questions(
    address: str,
    conversations: Sequence[Conversation],
    fact_to_turn: dict[str, dict[str, str]],
    args: argparse.Namespace,
) -> tuple[dict[str, Any], float]:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = pb_grpc.MemoryServiceStub(channel)
        return await ours_search(stub, conversations, fact_to_turn, args.warmup)


def run(args: argparse.Namespace) -> dict[str, Any]:
    conversations = select(args)
    texts = [t.memory_text for c in conversations for t in c.turns]
    questions = sum(len(c.questions) for c in conversations)
    print(
        f"{len(conversations)} conversations, {len(texts)} turns, {questions} questions", flush=True
    )
    result: dict[str, Any] = {"conversations": len(conversations), "facts": len(texts)}
    floor_texts = texts[: args.floor_texts]
    asked = [q.text for c in conversations for q in c.questions]
    result["model_floor_before_per_s"] = round(model_floor(floor_texts), 1)
    question_ms = [question_floor(asked)]
    print(f"model alone, batches of 32: {result['model_floor_before_per_s']} texts/s", flush=True)
    with (
        serving(["--max-facts-per-scope=5000"]) as server,
        tempfile.TemporaryDirectory(prefix="mem0-bench-") as workdir,
    ):
        result["ours_ingest"], fact_to_turn = asyncio.run(ours(server.address, conversations, args))
        print(f"ours ingest: {result['ours_ingest']}", flush=True)
        memory = mem0_memory(Path(workdir))
        result["mem0_ingest"], memory_to_turn = mem0_ingest(memory, conversations)
        print(f"mem0 ingest: {result['mem0_ingest']}", flush=True)
        result["ours_search"], result["ours_recall_at_10"] = asyncio.run(
            ours_questions(server.address, conversations, fact_to_turn, args)
        )
        print(f"ours search: {result['ours_search']}", flush=True)
        result["mem0_search"], result["mem0_recall_at_10"] = mem0_search(
            memory, conversations, memory_to_turn, args.warmup
        )
        print(f"mem0 search: {result['mem0_search']}", flush=True)
        memory.vector_store.client.close()
        result["server_problems"] = server.problems
    result["model_floor_after_per_s"] = round(model_floor(floor_texts), 1)
    question_ms.append(question_floor(asked))
    result["question_embedding_p50_ms"] = [round(m, 2) for m in question_ms]
    floor = statistics.mean([result["model_floor_before_per_s"], result["model_floor_after_per_s"]])
    oi, mi = result["ours_ingest"], result["mem0_ingest"]
    os_, ms = result["ours_search"], result["mem0_search"]
    result["ratios"] = {
        "ingest_indexed_vs_mem0": round(oi["indexed_per_s"] / mi["per_s"], 2),
        "ingest_acked_vs_mem0": round(oi["acked_per_s"] / mi["per_s"], 2),
        "ingest_indexed_vs_model_floor": round(oi["indexed_per_s"] / floor, 3),
        "mem0_ingest_vs_model_floor": round(mi["per_s"] / floor, 3),
        "search_p50_ours_vs_mem0": round(os_["p50_ms"] / ms["p50_ms"], 3),
        "search_p95_ours_vs_mem0": round(os_["p95_ms"] / ms["p95_ms"], 3),
        # What a search p50 of 1/3 of mem0's leaves, against one question's embedding alone.
        "third_of_mem0_search_p50_ms": round(ms["p50_ms"] / 3, 2),
        "question_embedding_vs_mem0_search_p50": round(
            statistics.mean(question_ms) / ms["p50_ms"], 3
        ),
    }
    return result


def report(result: dict[str, Any]) -> None:
    oi, mi = result["ours_ingest"], result["mem0_ingest"]
    os_, ms = result["ours_search"], result["mem0_search"]
    r = result["ratios"]
    print("\n| measured | ours | mem0 | ours ÷ mem0 |")
    print("|---|---|---|---|")
    print(
        f"| ingest, facts/s (indexed) | {oi['indexed_per_s']} ({oi['rpc']}, "
        f"{oi['concurrency']} in flight) "
        f"| {mi['per_s']} (1 thread) | {r['ingest_indexed_vs_mem0']}× |"
    )
    print(
        f"| ingest, facts/s (acked) | {oi['acked_per_s']} | {mi['per_s']} "
        f"| {r['ingest_acked_vs_mem0']}× |"
    )
    print(f"| search p50 ms | {os_['p50_ms']} | {ms['p50_ms']} | {r['search_p50_ours_vs_mem0']} |")
    print(f"| search p95 ms | {os_['p95_ms']} | {ms['p95_ms']} | {r['search_p95_ours_vs_mem0']} |")
    print(f"| Recall@10 | {result['ours_recall_at_10']} | {result['mem0_recall_at_10']} | |")
    print(
        f"\nmodel alone (batches of 32): {result['model_floor_before_per_s']} texts/s before, "
        f"{result['model_floor_after_per_s']} after; ours indexed ÷ model: "
        f"{r['ingest_indexed_vs_model_floor']}, mem0 ÷ model: {r['mem0_ingest_vs_model_floor']}"
    )
    print(
        f"one question embedded alone, p50: {result['question_embedding_p50_ms']} ms "
        f"(before, after) = {r['question_embedding_vs_mem0_search_p50']} of mem0's search p50; "
        f"1/3 of mem0's search p50: {r['third_of_mem0_search_p50_ms']} ms"
    )
    print("targets: ingest ≥ 3× mem0 and ≥ 0.60 of the model; search p50 ≤ 1/3 of mem0's")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    result = run(args)
    result["args"] = {k: str(v) for k, v in vars(args).items()}
    write_report(args.json_out, result)
    report(result)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
