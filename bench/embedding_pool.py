"""Embedding pool benchmark: batched vs unbatched with the real offline MiniLM model.

32 concurrent callers each embed one short fact per call, over and over, for N seconds, through
an EmbeddingPool with max_batch 32 (batched) and with max_batch 1 (unbatched). The ceiling is the
model alone (`model`): the same texts in batches of 32 straight on the backend, back to back, on
one thread, no pool and no event loop. Reports texts/s, per-call p50/p99, the ratio batched ÷
model (issue 17's target: ≥ 0.90) and batched ÷ unbatched, plus the model's load time and the
latency of one query alone. `--rounds` repeats the three modes interleaved, so that a shared
machine's noise hits them alike; the ratios are taken per round.

    .venv/bin/python bench/embedding_pool.py [--seconds 10] [--callers 32] [--threads 2] \
        [--rounds 1]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import statistics
import time
from dataclasses import dataclass

from latency import percentile

from memory_server.embedding import EmbeddingPool, MiniLMBackend

SUBJECTS = [
    "green tea", "dark mode", "Postgres", "hiking trips", "the billing engine", "Rust",
    "morning standups", "vinyl records", "the Lisbon office", "typed Python", "spicy food",
    "graph databases", "early flights", "electric bikes", "jazz piano", "code reviews",
]  # fmt: skip
TEMPLATES = [
    "The user said they really prefer {s} over the alternatives their team usually picks",
    "Last week the user decided to spend more of their weekend time on {s} with friends",
    "The user's long-term goal this year is to get much better at {s} at work",
    "The user mentioned that {s} is the one thing they never want to give up",
]


def facts(count: int) -> list[str]:
    return [
        TEMPLATES[i % len(TEMPLATES)].format(s=SUBJECTS[i % len(SUBJECTS)]) for i in range(count)
    ]


@dataclass
class Result:
    mode: str
    max_batch: int
    texts_per_s: float
    p50_ms: float
    p99_ms: float
    mean_batch: float
    errors: int
    # The share of the window the model was running (batches that ended in it), and the mean
    # time between one batch's end and the next one's start: the pool's hand-off cost.
    busy: float = 1.0
    gap_ms: float = 0.0


async def run_mode(
    mode: str, max_batch: int, seconds: float, callers: int, threads: int, warmup_s: float
) -> Result:
    texts = facts(callers)
    latencies: list[float] = []
    errors = 0
    spans: list[tuple[float, float]] = []

    def observe(texts: int, seconds: float) -> None:
        ended = time.perf_counter()
        spans.append((ended - seconds, ended))

    async with EmbeddingPool(
        MiniLMBackend(intra_op_threads=threads),
        max_batch=max_batch,
        max_wait_ms=2.0,
        cache_size=0,  # the same texts come back every call: measure the model, not the cache
        observe_batch=observe,
    ) as pool:
        await pool.embed(["load the model before the clock starts"])
        start = time.perf_counter() + warmup_s
        end = start + seconds
        batches_at_start = texts_at_start = 0

        async def caller(text: str) -> None:
            nonlocal errors
            while (now := time.perf_counter()) < end:
                try:
                    await pool.embed([text])
                except Exception:
                    errors += 1
                    continue
                done = time.perf_counter()
                if start <= now and done <= end:
                    latencies.append(done - now)

        async def mark_start() -> None:
            nonlocal batches_at_start, texts_at_start
            await asyncio.sleep(max(0.0, start - time.perf_counter()))
            batches_at_start, texts_at_start = pool.batches, pool.texts

        await asyncio.gather(mark_start(), *(caller(t) for t in texts))
        batches = pool.batches - batches_at_start
        mean_batch = (pool.texts - texts_at_start) / batches if batches else 0.0
    ordered = sorted(latencies)
    inside = [(a, b) for a, b in spans if start <= a and b <= end]
    busy = sum(b - a for a, b in inside) / seconds
    gaps = [later[0] - earlier[1] for earlier, later in zip(inside, inside[1:], strict=False)]
    return Result(
        mode=mode,
        max_batch=max_batch,
        texts_per_s=len(ordered) / seconds,
        p50_ms=percentile(ordered, 50) * 1000,
        p99_ms=percentile(ordered, 99) * 1000,
        mean_batch=mean_batch,
        errors=errors,
        busy=busy,
        gap_ms=statistics.mean(gaps) * 1000 if gaps else math.nan,
    )


def run_model(
    max_batch: int, seconds: float, callers: int, threads: int, warmup_s: float
) -> Result:
    """The model's own batched throughput: `callers` texts in batches of `max_batch`, back to
    back on this thread (the pool's ceiling: it can only add hand-offs and waits)."""
    texts = facts(callers)
    batches = [texts[i : i + max_batch] for i in range(0, len(texts), max_batch)]
    backend = MiniLMBackend(intra_op_threads=threads)
    backend.load()
    latencies: list[float] = []
    busy = 0.0
    start = time.perf_counter() + warmup_s
    end = start + seconds
    while time.perf_counter() < end:
        for batch in batches:
            began = time.perf_counter()
            backend.embed_batch(batch)
            done = time.perf_counter()
            if start <= began and done <= end:
                latencies.extend([done - began] * len(batch))
                busy += done - began
    backend.close()
    ordered = sorted(latencies)
    return Result(
        mode="model",
        max_batch=max_batch,
        texts_per_s=len(ordered) / seconds,
        p50_ms=percentile(ordered, 50) * 1000 if ordered else math.nan,
        p99_ms=percentile(ordered, 99) * 1000 if ordered else math.nan,
        mean_batch=float(min(max_batch, callers)),
        errors=0,
        busy=busy / seconds,
    )


async def single_query(threads: int, repeats: int) -> tuple[float, float, float]:
    """(load seconds, p50 ms of one text straight on the backend, p50 ms through the pool)."""
    backend = MiniLMBackend(intra_op_threads=threads)
    began = time.perf_counter()
    backend.load()
    load_s = time.perf_counter() - began
    text = facts(1)[0]
    backend.embed_batch([text])
    direct = []
    for _ in range(repeats):
        began = time.perf_counter()
        backend.embed_batch([text])
        direct.append(time.perf_counter() - began)
    backend.close()
    pooled = []
    async with EmbeddingPool(MiniLMBackend(intra_op_threads=threads), cache_size=0) as pool:
        await pool.embed([text])
        for _ in range(repeats):
            began = time.perf_counter()
            await pool.embed([text])
            pooled.append(time.perf_counter() - began)
    return load_s, statistics.median(direct) * 1000, statistics.median(pooled) * 1000


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="measured seconds per mode")
    parser.add_argument("--warmup", type=float, default=1.0, help="unmeasured seconds first")
    parser.add_argument("--callers", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2, help="onnxruntime intra-op threads")
    parser.add_argument("--rounds", type=int, default=1, help="interleaved repeats of the modes")
    args = parser.parse_args()

    load_s, direct_ms, pooled_ms = await single_query(args.threads, repeats=200)
    words = statistics.mean(len(f.split()) for f in facts(args.callers))
    print(f"model: all-MiniLM-L6-v2-int8, onnxruntime intra-op threads: {args.threads}")
    print(f"load: {load_s:.2f} s; one query alone: {direct_ms:.2f} ms on the backend, ")
    print(f"  {pooled_ms:.2f} ms through the pool (p50 of 200)")
    print(
        f"{args.callers} concurrent callers, one fact (~{words:.0f} words) per call, "
        f"{args.seconds:g} s measured after {args.warmup:g} s warm-up\n"
    )
    header = f"{'round':>5} {'mode':<10} {'max_batch':>9} {'texts/s':>9} {'p50 ms':>8}"
    print(header + f" {'p99 ms':>8} {'mean batch':>10} {'errors':>6} {'busy':>5} {'gap ms':>7}")
    print("-" * (len(header) + 41))
    of_model: list[float] = []
    of_unbatched: list[float] = []
    for round_no in range(1, args.rounds + 1):
        model = run_model(32, args.seconds, args.callers, args.threads, args.warmup)
        batched = await run_mode(
            "batched", 32, args.seconds, args.callers, args.threads, args.warmup
        )
        unbatched = await run_mode(
            "unbatched", 1, args.seconds, args.callers, args.threads, args.warmup
        )
        for r in (model, batched, unbatched):
            print(
                f"{round_no:>5} {r.mode:<10} {r.max_batch:>9} {r.texts_per_s:>9.1f} "
                f"{r.p50_ms:>8.2f} {r.p99_ms:>8.2f} {r.mean_batch:>10.1f} {r.errors:>6} "
                f"{r.busy:>5.2f} {r.gap_ms:>7.2f}"
            )
        of_model.append(batched.texts_per_s / model.texts_per_s)
        of_unbatched.append(batched.texts_per_s / unbatched.texts_per_s)
    ratio = statistics.median(of_model)
    verdict = "meets" if ratio >= 0.9 else "misses"
    print(
        f"\nbatched pool ÷ model alone: {ratio:.3f} (median of "
        f"{', '.join(f'{r:.3f}' for r in of_model)}; {verdict} the ≥ 0.90 target)"
    )
    print(
        f"batched ÷ unbatched: {statistics.median(of_unbatched):.2f}× (median of "
        f"{', '.join(f'{r:.2f}' for r in of_unbatched)})"
    )


if __name__ == "__main__":
    asyncio.run(main())
