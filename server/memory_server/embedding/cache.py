"""The embedding pool's bounded LRU cache of recent (model, dimension, text) -> vector.

A text embedded twice in one process (the reconciler embeds a new fact to find near-duplicates,
the outbox embeds it again to index it; every turn of a scope asks its question's vector for
facts and for episodes) reaches the backend once. Vectors are stored as immutable float64 arrays
and every caller gets its own list copy, so a hit is bit-identical to the miss that filled it.
The key carries the model's name and dimension, and the cache lives in the pool, which serves
one backend: another model never sees these vectors. A size of 0 turns it off.
"""

from __future__ import annotations

import threading
from array import array
from collections import OrderedDict
from collections.abc import Sequence


class VectorCache:
    """Least recently used vectors, at most `size` of them, keyed by model, dimension and
    text (the backend's model is read at each call: one re-pointed never sees old vectors)."""

    def __init__(self, size: int) -> None:
        if size < 0:
            raise ValueError("cache_size must not be negative")
        self._size = size
        self._entries: OrderedDict[tuple[str, int, str], array[float]] = OrderedDict()
        self._lock = threading.Lock()  # the loop is the only user today; cheap insurance
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(
        self, model: str, dimension: int, texts: Sequence[str], results: list[list[float] | None]
    ) -> list[int]:
        """Fills `results[i]` for each cached text; returns the indexes it does not hold."""
        if not self._size:
            return list(range(len(texts)))
        wanted: list[int] = []
        with self._lock:
            for i, text in enumerate(texts):
                key = (model, dimension, text)
                cached = self._entries.get(key)
                if cached is None:
                    wanted.append(i)
                else:
                    self._entries.move_to_end(key)
                    results[i] = cached.tolist()
            self.hits += len(texts) - len(wanted)
            self.misses += len(wanted)
        return wanted

    def remember(
        self, model: str, dimension: int, texts: Sequence[str], vectors: Sequence[list[float]]
    ) -> None:
        """Keeps the vectors just embedded, evicting the least recently used."""
        if not self._size:
            return
        with self._lock:
            for text, vector in zip(texts, vectors, strict=True):
                key = (model, dimension, text)
                self._entries[key] = array("d", vector)
                self._entries.move_to_end(key)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)
