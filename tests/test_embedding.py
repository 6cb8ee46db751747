"""The embedding pool (batching, bounds, lifecycle), the real offline MiniLM model, and the
OpenAI-compatible backend against a loopback endpoint that speaks the real wire protocol."""

from __future__ import annotations

import asyncio
import math
import os
import socket
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from memory_server.embedding import (
    DimensionMismatch,
    EmbeddingPool,
    MiniLMBackend,
    OpenAICompatibleEmbeddings,
)
from memory_server.embedding.minilm import group_by_length
from memory_server.embedding.pool import EMBEDDING_NICE
from memory_server.memory.errors import Overloaded, Unavailable
from memory_server.memory.ports import Embedder

from fake_openai import FakeEmbeddings, fake_vector


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / (math.hypot(*a) * math.hypot(*b))


class FakeSyncBackend:
    """A synchronous backend that records where and with what it was called."""

    def __init__(self, *, fail_load: int = 0, fail_batches: int = 0) -> None:
        self.model_name = "fake-sync"
        self.dimension = 4
        self.fail_load = fail_load
        self.fail_batches = fail_batches
        self.load_calls = 0
        self.close_calls = 0
        self.batches: list[list[str]] = []
        self.threads: set[int] = set()

    def load(self) -> None:
        self.load_calls += 1
        self.threads.add(threading.get_ident())
        if self.fail_load > 0:
            self.fail_load -= 1
            raise OSError("model file is unreadable")

    def embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        self.threads.add(threading.get_ident())
        if self.fail_batches > 0:
            self.fail_batches -= 1
            raise RuntimeError("the runtime broke")
        self.batches.append(list(texts))
        return [fake_vector(t) for t in texts]

    def close(self) -> None:
        self.close_calls += 1


class GatedAsyncBackend:
    """An async backend whose batches wait until the test opens the gate."""

    def __init__(self) -> None:
        self.model_name = "fake-async"
        self.dimension = 4
        self.gate = asyncio.Event()
        self.entered = asyncio.Event()
        self.batches: list[list[str]] = []
        self.close_calls = 0

    async def load(self) -> None:
        pass

    async def embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        self.batches.append(list(texts))
        self.entered.set()
        await self.gate.wait()
        return [fake_vector(t) for t in texts]

    async def close(self) -> None:
        self.close_calls += 1


FACTS = [f"The user's fact number {i} is that they like item {i} on weekdays" for i in range(32)]


# --- the real offline model -----------------------------------------------------------------


@pytest.fixture(scope="module")
def minilm() -> Iterator[MiniLMBackend]:
    backend = MiniLMBackend()
    backend.load()
    yield backend
    backend.close()


def test_minilm_vectors_are_unit_384_and_meaningful(minilm: MiniLMBackend) -> None:
    assert minilm.model_name == "all-MiniLM-L6-v2-int8"
    assert minilm.dimension == 384
    tea, drink, graph, long = minilm.embed_batch(
        [
            "I prefer tea",
            "my favourite drink is tea",
            "the graph has 12 vertex types",
            "word " * 2000,  # truncated to 256 tokens, not an error
        ]
    )
    for vector in (tea, drink, graph, long):
        assert len(vector) == 384
        assert math.hypot(*vector) == pytest.approx(1.0, abs=1e-5)
    assert cosine(tea, drink) > cosine(tea, graph) + 0.2
    assert cosine(tea, drink) > 0.5


def test_minilm_is_lazy_and_close_is_idempotent() -> None:
    backend = MiniLMBackend()
    assert not backend.loaded
    backend.close()  # safe when never loaded
    assert backend.embed_batch([]) == []
    assert not backend.loaded


def test_minilm_runs_a_batch_by_length_and_keeps_its_order(minilm: MiniLMBackend) -> None:
    # Lengths from 3 to ~200 tokens, shuffled: the sub-batches are cut by length, so the
    # answers must still come back in the caller's order and equal one text per call.
    texts = [" ".join(["tea"] * n) + f" fact {n}" for n in (150, 2, 40, 7, 90, 1, 19, 60, 4, 200)]
    one_at_a_time = [minilm.embed_batch([text])[0] for text in texts]
    batched = minilm.embed_batch(texts)
    assert len(batched) == len(texts)
    for got, want in zip(batched, one_at_a_time, strict=True):
        assert cosine(got, want) > 0.9999
    assert cosine(batched[0], one_at_a_time[1]) < 0.9999


def test_group_by_length_cuts_at_the_padded_token_budget() -> None:
    lengths = [10, 3, 50, 4, 12, 300, 5]
    groups = group_by_length(lengths, 40)
    assert sorted(i for g in groups for i in g) == list(range(len(lengths)))
    # shortest first; 4 x 10 = 40 still fits, a fifth (12) would pad to 60; 50 and 300 alone
    assert groups == [[1, 3, 6, 0], [4], [2], [5]]
    for group in groups:
        longest = max(lengths[i] for i in group)
        assert len(group) == 1 or len(group) * longest <= 40
    assert group_by_length([], 40) == []
    assert group_by_length([8] * 10, 1000) == [list(range(10))]


async def test_pool_coalesces_concurrent_calls_with_the_real_model(minilm: MiniLMBackend) -> None:
    expected = [minilm.embed_batch([fact])[0] for fact in FACTS]  # unbatched
    async with EmbeddingPool(MiniLMBackend(), max_batch=32, max_wait_ms=5.0) as pool:
        embedder: Embedder = pool
        assert embedder.dimension == 384
        assert embedder.model_name == "all-MiniLM-L6-v2-int8"
        assert not pool.loaded  # nothing embedded yet: no model in memory
        results = await asyncio.gather(*(pool.embed([fact]) for fact in FACTS))
        assert pool.loaded
        assert pool.load_seconds is not None
        assert pool.texts == 32
        assert pool.batches <= 4
        assert pool.mean_batch_size >= 8
        for got, want in zip(results, expected, strict=True):
            assert len(got) == 1
            assert cosine(got[0], want) > 0.999
        # and a caller's own vector is not any other caller's
        assert cosine(results[0][0], expected[1]) < 0.999


# --- the pool with fake backends ------------------------------------------------------------


async def test_a_call_larger_than_max_batch_is_split_and_kept_in_order() -> None:
    backend = FakeSyncBackend()
    texts = [f"text {i}" for i in range(10)]
    async with EmbeddingPool(backend, max_batch=4, max_wait_ms=1.0) as pool:
        vectors = await pool.embed(texts)
    assert vectors == [fake_vector(t) for t in texts]
    assert [len(b) for b in backend.batches] == [4, 4, 2]
    assert pool.batches == 3
    assert pool.last_batch_size == 2
    assert pool.texts == 10


async def test_concurrent_callers_get_their_own_vectors() -> None:
    backend = FakeSyncBackend()
    calls = [[f"c{c} t{i}" for i in range(1 + c % 3)] for c in range(20)]
    async with EmbeddingPool(backend, max_batch=8, max_wait_ms=2.0) as pool:
        results = await asyncio.gather(*(pool.embed(texts) for texts in calls))
    for texts, vectors in zip(calls, results, strict=True):
        assert vectors == [fake_vector(t) for t in texts]
    assert all(len(b) <= 8 for b in backend.batches)
    assert pool.batches == len(backend.batches) < 20


async def test_sync_backend_runs_on_one_worker_thread_and_loads_lazily() -> None:
    backend = FakeSyncBackend()
    pool = EmbeddingPool(backend)
    await pool.start()
    assert not pool.loaded and backend.load_calls == 0
    await pool.embed(["a"])
    await pool.embed(["b", "c"])
    assert pool.loaded and backend.load_calls == 1
    assert len(backend.threads) == 1
    assert threading.get_ident() not in backend.threads
    await pool.close()
    assert backend.close_calls == 1
    assert not pool.loaded


async def test_empty_input_and_a_lone_str() -> None:
    async with EmbeddingPool(FakeSyncBackend()) as pool:
        assert await pool.embed([]) == []
        with pytest.raises(TypeError):
            await pool.embed("not a list")


async def test_full_queue_raises_overloaded_at_once() -> None:
    backend = GatedAsyncBackend()
    async with EmbeddingPool(backend, max_batch=1, max_wait_ms=0, max_queue=3) as pool:
        first = asyncio.create_task(pool.embed(["a"]))
        await asyncio.wait_for(backend.entered.wait(), 5)  # "a" is in flight, the queue empty
        queued = asyncio.create_task(pool.embed(["b", "c", "d"]))
        await asyncio.sleep(0)
        assert pool.queue_depth == 3
        with pytest.raises(Overloaded):
            await pool.embed(["e"])
        with pytest.raises(Overloaded):
            await pool.embed(["x"] * 4)  # could never fit
        backend.gate.set()
        assert await first == [fake_vector("a")]
        assert await queued == [fake_vector(t) for t in "bcd"]
        assert await pool.embed(["e"]) == [fake_vector("e")]


async def test_close_drains_what_is_queued() -> None:
    backend = FakeSyncBackend()
    pool = EmbeddingPool(backend, max_batch=4, max_wait_ms=50.0)
    await pool.start()
    tasks = [asyncio.create_task(pool.embed([f"t{i}"])) for i in range(6)]
    await asyncio.sleep(0)  # all six are queued, none embedded yet
    await pool.close()
    assert [await t for t in tasks] == [[fake_vector(f"t{i}")] for i in range(6)]


async def test_close_fails_pending_calls_with_unavailable() -> None:
    backend = GatedAsyncBackend()
    pool = EmbeddingPool(backend, max_batch=1, max_wait_ms=0)
    await pool.start()
    tasks = [asyncio.create_task(pool.embed([t])) for t in "abc"]
    await asyncio.wait_for(backend.entered.wait(), 5)
    await pool.close(drain_timeout_s=0.05)  # "a" never finishes: the gate stays shut
    for task in tasks:
        with pytest.raises(Unavailable):
            await task
    assert backend.close_calls == 1
    await pool.close()  # idempotent
    assert backend.close_calls == 1
    with pytest.raises(Unavailable, match="closed"):
        await pool.embed(["d"])


async def test_close_is_safe_before_start_and_embed_needs_start() -> None:
    backend = FakeSyncBackend()
    pool = EmbeddingPool(backend)
    with pytest.raises(Unavailable, match="not started"):
        await pool.embed(["a"])
    await pool.close()
    await pool.close()
    await pool.start()  # a closed pool stays closed
    with pytest.raises(Unavailable, match="closed"):
        await pool.embed(["a"])
    assert backend.load_calls == 0


async def test_backend_failures_reach_the_callers_and_the_pool_recovers() -> None:
    backend = FakeSyncBackend(fail_load=1, fail_batches=1)
    async with EmbeddingPool(backend) as pool:
        with pytest.raises(Unavailable, match="could not be loaded"):
            await pool.embed(["a"])
        assert not pool.loaded
        with pytest.raises(Unavailable, match="RuntimeError"):
            await pool.embed(["a"])  # loads now, then the batch fails
        assert pool.loaded
        assert await pool.embed(["a"]) == [fake_vector("a")]
        assert backend.load_calls == 2
        assert pool.batches == 1


async def test_a_backend_with_the_wrong_dimension_is_caught() -> None:
    backend = FakeSyncBackend()
    backend.dimension = 8  # claims 8, returns 4
    async with EmbeddingPool(backend) as pool:
        with pytest.raises(DimensionMismatch):
            await pool.embed(["a"])


async def test_a_caller_that_gives_up_does_not_break_the_batch() -> None:
    backend = GatedAsyncBackend()
    async with EmbeddingPool(backend, max_batch=1, max_wait_ms=0) as pool:
        first = asyncio.create_task(pool.embed(["a"]))
        await asyncio.wait_for(backend.entered.wait(), 5)
        abandoned = asyncio.create_task(pool.embed(["b"]))
        kept = asyncio.create_task(pool.embed(["c"]))
        await asyncio.sleep(0)
        abandoned.cancel()
        backend.gate.set()
        assert await first == [fake_vector("a")]
        assert await kept == [fake_vector("c")]
        with pytest.raises(asyncio.CancelledError):
            await abandoned
    assert backend.batches == [["a"], ["c"]]


# --- the OpenAI-compatible backend ----------------------------------------------------------


def backend_for(fake: FakeEmbeddings, **kwargs: Any) -> OpenAICompatibleEmbeddings:
    return OpenAICompatibleEmbeddings(
        base_url=fake.base_url,
        model="text-embedding-test",
        api_key=kwargs.pop("api_key", "sk-test"),
        dimension=fake.dimension,
        timeout_s=kwargs.pop("timeout_s", 5.0),
    )


async def test_openai_backend_speaks_the_wire_protocol(fake_embeddings: FakeEmbeddings) -> None:
    texts = ["I prefer tea", "the graph has 12 vertex types", "a third one"]
    async with backend_for(fake_embeddings) as backend:
        vectors = await backend.embed_batch(texts)
    (request,) = fake_embeddings.requests
    assert request["path"] == "/v1/embeddings"
    assert request["body"] == {"model": "text-embedding-test", "input": texts}
    assert request["headers"]["Authorization"] == "Bearer sk-test"
    for text, vector in zip(texts, vectors, strict=True):
        assert math.hypot(*vector) == pytest.approx(1.0, abs=1e-9)
        assert vector == pytest.approx(fake_vector(text, 6), abs=1e-9)


async def test_openai_backend_behind_the_pool(fake_embeddings: FakeEmbeddings) -> None:
    async with EmbeddingPool(backend_for(fake_embeddings), max_batch=3, max_wait_ms=5.0) as pool:
        assert pool.model_name == "text-embedding-test"
        results = await asyncio.gather(*(pool.embed([f"fact {i}"]) for i in range(7)))
    for i, vectors in enumerate(results):
        assert vectors[0] == pytest.approx(fake_vector(f"fact {i}", 6), abs=1e-9)
    assert [len(r["body"]["input"]) for r in fake_embeddings.requests] == [3, 3, 1]


@pytest.mark.parametrize(
    ("mode", "error"),
    [("status500", Unavailable), ("status503", Unavailable), ("status429", Overloaded)],
)
async def test_openai_backend_maps_error_statuses(
    fake_embeddings: FakeEmbeddings, mode: str, error: type[Exception]
) -> None:
    fake_embeddings.mode = mode
    async with backend_for(fake_embeddings) as backend:
        with pytest.raises(error) as caught:
            await backend.embed_batch(["my secret plans"])
    assert "secret" not in str(caught.value)


async def test_openai_backend_rejects_a_dimension_mismatch(
    fake_embeddings: FakeEmbeddings,
) -> None:
    fake_embeddings.mode = "wrongdim"
    async with backend_for(fake_embeddings) as backend:
        with pytest.raises(DimensionMismatch, match="7-dimensional vectors; 6 are configured"):
            await backend.embed_batch(["a"])


async def test_openai_backend_connection_refused_is_unavailable() -> None:
    with socket.socket() as probe:  # a port that nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    backend = OpenAICompatibleEmbeddings(
        f"http://127.0.0.1:{port}/v1", "m", api_key=None, dimension=4, timeout_s=5.0
    )
    async with EmbeddingPool(backend) as pool:
        with pytest.raises(Unavailable, match="unreachable"):
            await pool.embed(["a"])


async def test_openai_backend_timeout_is_unavailable(fake_embeddings: FakeEmbeddings) -> None:
    fake_embeddings.mode = "slow"
    async with backend_for(fake_embeddings, timeout_s=0.2) as backend:
        with pytest.raises(Unavailable, match="did not answer in 0.2s"):
            await backend.embed_batch(["a"])
    fake_embeddings.release.set()


@pytest.mark.skipif(not hasattr(os, "getpriority"), reason="no thread priorities here")
async def test_the_model_runs_nicer_than_the_service() -> None:
    """Bulk embedding (an imported history's episodes) yields the CPU to the event loop and
    PostgreSQL: the pool's worker thread, and the model's threads it starts, run at
    EMBEDDING_NICE (tests/test_no_stall.py measures what that buys)."""
    own = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    async with EmbeddingPool(MiniLMBackend(), cache_size=0) as pool:
        await pool.embed(["Which device did the two accounts share?"])
        workers = [t for t in threading.enumerate() if t.name.startswith("embedding")]
        assert workers
        for worker in workers:
            assert worker.native_id is not None
            nice = os.getpriority(os.PRIO_PROCESS, worker.native_id)
            assert nice == min(19, own + EMBEDDING_NICE)
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == own  # the loop's
