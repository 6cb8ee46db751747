"""One embedding for one question: a turn's fact recall and its episode recall embed the same
question text at the same moment, and the shared embedding pool would embed it twice (its
cache is filled only once the first is done). `SharedEmbeddings` lets concurrent requests for
the same single text wait on one embedding instead."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from memory_server.memory.ports import Embedder


class SharedEmbeddings:
    """An Embedder: a single text already being embedded is not embedded again until that is
    done; anything else goes to `inner` as it is."""

    def __init__(self, inner: Embedder) -> None:
        self._inner = inner
        self._pending: dict[str, asyncio.Future[list[list[float]]]] = {}

    @property
    def model_name(self) -> str:
        return self._inner.model_name

    @property
    def dimension(self) -> int:
        return self._inner.dimension

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if len(texts) != 1:
            return await self._inner.embed(texts)
        text = texts[0]
        pending = self._pending.get(text)
        if pending is None:
            pending = asyncio.ensure_future(self._inner.embed([text]))
            self._pending[text] = pending
            pending.add_done_callback(lambda _: self._pending.pop(text, None))
        # A caller cancelled (its deadline passed) does not cancel the other's embedding.
        return await asyncio.shield(pending)
