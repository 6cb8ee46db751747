"""The embedding pool's LRU cache: a text embedded twice reaches the backend once, with the same
vector; it is bounded, keyed by the model, and safe under concurrent callers."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

import pytest

from memory_server.embedding import EmbeddingPool, MiniLMBackend
from memory_server.memory.recall.shared_vectors import SharedEmbeddings

from fake_openai import fake_vector


class CountingBackend:
    """A synchronous backend that records every text it was asked to embed."""

    def __init__(self, model_name: str = "counting") -> None:
        self.model_name = model_name
        self.dimension = 4
        self.seen: list[str] = []
        self.lock = threading.Lock()

    def load(self) -> None:
        pass

    def embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        with self.lock:
            self.seen.extend(texts)
        return [fake_vector(f"{self.model_name}:{t}") for t in texts]

    def close(self) -> None:
        pass


async def test_the_real_model_embeds_a_repeated_text_once_and_the_vector_is_identical() -> None:
    texts = ["The user lives in Lisbon", "The user's sister is called Ana"]
    async with EmbeddingPool(MiniLMBackend(), cache_size=16) as pool:
        first = await pool.embed(texts)
        assert (pool.texts, pool.cache_hits, pool.cache_misses) == (2, 0, 2)
        again = await pool.embed([texts[1], "A new text", texts[0]])
        assert pool.texts == 3  # only the new text reached the model
        assert (pool.cache_hits, pool.cache_misses) == (2, 3)
        assert again[0] == first[1] and again[2] == first[0]  # bit-identical
        again[0][0] = 99.0  # a caller's list is its own: the cache is not changed through it
        assert (await pool.embed([texts[1]]))[0] == first[1]
    async with EmbeddingPool(MiniLMBackend(), cache_size=0) as uncached:
        assert await uncached.embed(texts) == first  # what the model gives without a cache
        assert await uncached.embed(texts) == first
        assert uncached.texts == 4 and uncached.cache_hits == 0


async def test_the_cache_is_bounded_and_evicts_the_least_recently_used() -> None:
    backend = CountingBackend()
    async with EmbeddingPool(backend, cache_size=3, max_wait_ms=0) as pool:
        await pool.embed(["a", "b", "c"])
        await pool.embed(["a"])  # a is now the most recent; b the least
        await pool.embed(["d"])  # evicts b
        assert pool.cache_entries == 3
        backend.seen.clear()
        await pool.embed(["a", "c", "d"])
        assert backend.seen == []
        await pool.embed(["b"])
        assert backend.seen == ["b"]
        assert pool.cache_entries == 3
    with pytest.raises(ValueError, match="cache_size"):
        EmbeddingPool(CountingBackend(), cache_size=-1)


async def test_a_model_change_never_reuses_old_vectors() -> None:
    backend = CountingBackend("model-one")
    async with EmbeddingPool(backend, cache_size=16) as pool:
        old = await pool.embed(["the same text"])
        backend.model_name = "model-two"  # e.g. a backend re-pointed at another model
        new = await pool.embed(["the same text"])
        assert backend.seen == ["the same text", "the same text"]
        assert new != old and new == [fake_vector("model-two:the same text")]
        backend.dimension = 8  # same name, another shape: another key too
        with pytest.raises(Exception, match="dimension"):
            await pool.embed(["the same text"])


async def test_concurrent_callers_with_overlapping_texts_all_get_the_right_vectors() -> None:
    backend = CountingBackend()
    texts = [f"fact {i % 40}" for i in range(400)]
    asked = [0]
    async with EmbeddingPool(backend, cache_size=64, max_batch=8, max_wait_ms=1.0) as pool:

        async def caller(offset: int) -> None:
            for start in range(offset, len(texts), 25):
                chunk = texts[start : start + 5]
                asked[0] += len(chunk)
                got = await pool.embed(chunk)
                assert got == [fake_vector(f"counting:{t}") for t in chunk]

        await asyncio.gather(*(caller(o) for o in range(25)))
        # Every distinct text was cached after its first batch; concurrent first sightings may
        # be embedded more than once, but far fewer than the texts asked for.
        assert set(backend.seen) == set(texts)
        assert pool.cache_hits + pool.cache_misses == asked[0]
        assert pool.cache_misses == len(backend.seen)
        assert len(backend.seen) < asked[0] / 4


async def test_a_question_embedded_twice_at_once_is_embedded_once() -> None:
    """A turn's fact recall and episode recall ask for the same question together: the pool
    (even without its cache) embeds it once (memory.recall.shared_vectors)."""
    async with EmbeddingPool(MiniLMBackend(), cache_size=0) as pool:
        shared = SharedEmbeddings(pool)
        question = "Which device did the two accounts share?"
        first, second, other = await asyncio.gather(
            shared.embed([question]), shared.embed([question]), shared.embed(["Another text"])
        )
        assert first == second and first != other
        assert pool.texts == 2
        again = await shared.embed([question])  # once done, a later request embeds anew
        assert again == first and pool.texts == 3
        # One caller giving up does not take the embedding from the other.
        waiting = asyncio.ensure_future(shared.embed(["Cancelled text"]))
        kept = asyncio.ensure_future(shared.embed(["Cancelled text"]))
        await asyncio.sleep(0)
        waiting.cancel()
        assert len((await kept)[0]) == pool.dimension
