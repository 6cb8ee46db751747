"""A synchronous embedding backend behind an async face: loading and every batch run on one
worker thread the wrapper owns, off the event loop."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from memory_server.embedding.backend import EmbeddingBackend


class ThreadedBackend:
    """Adapts a synchronous backend: every call runs on one dedicated worker thread, in
    submission order (so `close` runs after any batch still in flight)."""

    def __init__(self, backend: EmbeddingBackend, *, nice: int = 0) -> None:
        """`nice`: the worker thread's niceness (Linux and macOS), raised before the model is
        loaded there, so the threads the model's runtime starts from it inherit it: the model
        then takes the CPU only when the event loop and PostgreSQL leave it some."""
        self._backend = backend
        self._executor = ThreadPoolExecutor(
            max_workers=1,
            thread_name_prefix="embedding",
            initializer=_lower_priority,
            initargs=(nice,),
        )

    @property
    def model_name(self) -> str:
        return self._backend.model_name

    @property
    def dimension(self) -> int:
        return self._backend.dimension

    async def load(self) -> None:
        await asyncio.get_running_loop().run_in_executor(self._executor, self._backend.load)

    async def embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        return await asyncio.get_running_loop().run_in_executor(
            self._executor, self._backend.embed_batch, list(texts)
        )

    async def close(self) -> None:
        try:
            await asyncio.get_running_loop().run_in_executor(self._executor, self._backend.close)
        except asyncio.CancelledError:
            # The worker is stuck in a batch: leave it to finish on its own.
            self._executor.shutdown(wait=False, cancel_futures=True)
            raise
        self._executor.shutdown(wait=True)  # the worker is idle: this returns at once


def _lower_priority(nice: int) -> None:
    """Raises the calling thread's niceness by `nice` (a thread is a task to the kernel);
    nothing where the platform cannot."""
    if nice <= 0 or not hasattr(os, "setpriority"):
        return
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
