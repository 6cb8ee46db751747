"""The embedding pool's two lanes: a turn's question goes before the outbox's background work,
which is embedded a few texts at a time and never crowds a question out of the queue; the local
model embeds background texts in a lowest-priority process of its own."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Sequence

import pytest
from test_embedding import GatedAsyncBackend, cosine

from memory_server.embedding import EmbeddingPool, MiniLMBackend
from memory_server.embedding.lanes import BACKGROUND_BATCH_CHARS
from memory_server.embedding.process import ProcessBackend
from memory_server.memory.errors import Overloaded, Unavailable

from fake_openai import fake_vector

LONG = BACKGROUND_BATCH_CHARS // 4  # four of these fill a background batch


def _long(i: int) -> str:
    return f"{i:04d}" + "x" * (LONG - 4)


class SteppedBackend:
    """An async backend that runs one batch per permit the test hands it."""

    def __init__(self) -> None:
        self.model_name = "fake-stepped"
        self.dimension = 4
        self.permits: asyncio.Queue[None] = asyncio.Queue()
        self.started: asyncio.Queue[list[str]] = asyncio.Queue()
        self.batches: list[list[str]] = []

    async def load(self) -> None:
        pass

    async def embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        self.batches.append(list(texts))
        self.started.put_nowait(list(texts))
        await self.permits.get()
        return [fake_vector(t) for t in texts]

    async def close(self) -> None:
        pass

    async def next_batch(self) -> list[str]:
        """Lets the batch in flight finish; the texts of the next one to start."""
        self.permits.put_nowait(None)
        return await asyncio.wait_for(self.started.get(), 5)


async def test_a_question_goes_before_queued_background_texts() -> None:
    backend = SteppedBackend()
    async with EmbeddingPool(backend, max_batch=32, max_wait_ms=0) as pool:
        history = [_long(i) for i in range(10)]
        indexing = asyncio.create_task(pool.background().embed(history))
        # A small batch, not 10 (nor 32) texts.
        assert await asyncio.wait_for(backend.started.get(), 5) == history[:4]
        question = asyncio.create_task(pool.embed(["What is due today?"]))
        await asyncio.sleep(0)
        assert await backend.next_batch() == ["What is due today?"]  # ahead of texts 4..9
        assert await backend.next_batch() == history[4:8]
        assert await question == [fake_vector("What is due today?")]
        assert await backend.next_batch() == history[8:]
        backend.permits.put_nowait(None)
        assert await indexing == [fake_vector(t) for t in history]


async def test_a_background_text_longer_than_a_batch_goes_alone_and_short_ones_together() -> None:
    backend = GatedAsyncBackend()
    backend.gate.set()
    async with EmbeddingPool(backend, max_batch=8, max_wait_ms=0) as pool:
        huge = "y" * (BACKGROUND_BATCH_CHARS * 2)
        short = [f"fact {i}" for i in range(12)]
        lane = pool.background()
        assert (lane.model_name, lane.dimension) == (pool.model_name, pool.dimension)
        assert await lane.embed([huge, *short]) == [fake_vector(t) for t in [huge, *short]]
    assert backend.batches == [[huge], short[:8], short[8:]]  # max_batch still bounds a batch


async def test_background_work_never_crowds_a_question_out_of_the_queue() -> None:
    backend = GatedAsyncBackend()
    async with EmbeddingPool(backend, max_batch=1, max_wait_ms=0, max_queue=3) as pool:
        first = asyncio.create_task(pool.embed(["a"]))
        await asyncio.wait_for(backend.entered.wait(), 5)
        queued = asyncio.create_task(pool.background().embed(["b", "c", "d"]))
        await asyncio.sleep(0)
        assert pool.queue_depth == 3
        with pytest.raises(Overloaded, match="embedding queue is full"):
            await pool.background().embed(["e"])  # the background lane is full
        question = asyncio.create_task(pool.embed(["q"]))  # a question is still taken
        await asyncio.sleep(0)
        assert pool.queue_depth == 4
        backend.gate.set()
        assert await question == [fake_vector("q")]
        assert await first == [fake_vector("a")]
        assert await queued == [fake_vector(t) for t in "bcd"]
    assert backend.batches == [["a"], ["q"], ["b"], ["c"], ["d"]]


async def test_close_fails_queued_background_texts_with_unavailable() -> None:
    backend = GatedAsyncBackend()
    pool = EmbeddingPool(backend, max_batch=1, max_wait_ms=0)
    await pool.start()
    in_flight = asyncio.create_task(pool.embed(["a"]))
    await asyncio.wait_for(backend.entered.wait(), 5)
    waiting = asyncio.create_task(pool.background().embed(["b"]))
    await asyncio.sleep(0)
    await pool.close(drain_timeout_s=0.05)  # "a" never finishes: the gate stays shut
    for task in (in_flight, waiting):
        with pytest.raises(Unavailable):
            await task
    with pytest.raises(Unavailable, match="closed"):
        await pool.background().embed(["c"])


# --- the local model's background copy, in a process of its own ----------------------------


async def test_the_local_model_embeds_background_texts_in_an_idle_process_of_its_own() -> None:
    texts = ["The user adopted a beagle named Biscuit", "What is due today?"]
    async with EmbeddingPool(MiniLMBackend(), cache_size=0) as pool:
        foreground = await pool.embed(texts)
        background = await pool.background().embed(texts)
    for a, b in zip(foreground, background, strict=True):
        assert cosine(a, b) > 0.9999  # the same model, in another process
    model = MiniLMBackend()
    worker = ProcessBackend(model.background_factory(), model_name="m", dimension=384)
    try:
        pid, policy = await worker.worker()
        assert pid != os.getpid()
        if hasattr(os, "SCHED_IDLE"):
            assert policy == os.SCHED_IDLE  # CPU only when nothing else wants it
        assert not model.loaded  # the copy is made in the worker
    finally:
        await worker.close()
    assert not worker.started


async def test_a_background_process_that_dies_fails_its_batch_and_the_next_one_starts_again() -> (
    None
):
    worker = ProcessBackend(MiniLMBackend().background_factory(), model_name="m", dimension=384)
    try:
        await worker.load()
        pid, _ = await worker.worker()
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(Unavailable, match="background embedding process stopped"):
            await worker.embed_batch(["a text"])
        [vector] = await worker.embed_batch(["a text"])  # a new process
        assert len(vector) == 384
        assert (await worker.worker())[0] != pid
    finally:
        await worker.close()


_HOLDER = """
import asyncio, sys
from memory_server.embedding import MiniLMBackend
from memory_server.embedding.process import ProcessBackend

async def main():
    worker = ProcessBackend(MiniLMBackend().background_factory(), model_name="m", dimension=384)
    pid, _ = await worker.worker()
    print(pid, flush=True)
    await asyncio.sleep(600)

asyncio.run(main())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
async def test_the_background_process_dies_with_a_server_killed_with_sigkill() -> None:
    holder = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _HOLDER, stdout=asyncio.subprocess.PIPE
    )
    assert holder.stdout is not None
    try:
        worker = int(await asyncio.wait_for(holder.stdout.readline(), 60))
        os.kill(worker, 0)  # alive
    finally:
        holder.kill()
        await holder.wait()
    for _ in range(100):
        try:
            os.kill(worker, 0)
        except ProcessLookupError:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"the background worker {worker} outlived its server")
