"""A synchronous model in a worker process of its own, at the lowest CPU priority: the pool's
background lane (the outbox indexing facts and episodes) when the model can run a second copy.

Why a process, not a low-priority thread: a thread shares the interpreter's lock with the
event loop. A thread at the lowest priority that holds the lock when the CPU is busy (an
import's PostgreSQL work on two cores) is not scheduled again for seconds, and the loop waits
for the lock that long: measured with a busy core beside tests/test_no_stall.py, a SCHED_IDLE
thread stalled every other scope's turns for 6.2 s; nice 10 on the pool's own thread, 0.1-0.6 s.
A process shares no lock: at SCHED_IDLE (Linux; nice 19 elsewhere) it takes only the CPU that
turns and PostgreSQL leave idle, and the loop only sends it texts and reads back vectors.

The process is started (spawn, not fork: the server has gRPC's threads) on the first batch and
loads the model there; one that dies is started again on the next batch. On Linux it dies with
the server (PR_SET_PDEATHSIG), so a server killed with SIGKILL leaves no worker behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TypeVar

from memory_server.embedding.backend import EmbeddingBackend
from memory_server.memory.errors import Unavailable

_T = TypeVar("_T")
_PR_SET_PDEATHSIG = 1  # linux/prctl.h
_model: EmbeddingBackend | None = None  # the worker process's model


class ProcessBackend:
    """An async backend over `factory()`'s model, run in one lowest-priority process."""

    def __init__(
        self, factory: Callable[[], EmbeddingBackend], *, model_name: str, dimension: int
    ) -> None:
        """`factory` must pickle (a class or a functools.partial of one): the process calls
        it to make its model."""
        self._factory = factory
        self._model_name = model_name
        self._dimension = dimension
        self._lock = threading.Lock()
        self._executor: ProcessPoolExecutor | None = None

    @property
    def model_name(self) -> str:
        return self._model_name

    @property
    def dimension(self) -> int:
        return self._dimension

    async def load(self) -> None:
        """Starts the process and loads the model in it."""
        await self._call(_ready)

    async def embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        return await self._call(_embed, list(texts))

    async def close(self) -> None:
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            await asyncio.to_thread(executor.shutdown, wait=True, cancel_futures=True)

    @property
    def started(self) -> bool:
        return self._executor is not None

    async def worker(self) -> tuple[int, int]:
        """The worker process's pid and scheduling policy (os.SCHED_*; -1 where the platform
        has none), starting it if need be."""
        return await self._call(_whoami)

    async def _call(self, function: Callable[..., _T], *args: object) -> _T:
        executor = self._worker()
        try:
            return await asyncio.wrap_future(executor.submit(function, *args))
        except BrokenProcessPool as exc:
            with self._lock:
                if self._executor is executor:
                    self._executor = None  # the next batch starts a new one
            executor.shutdown(wait=False, cancel_futures=True)
            raise Unavailable("the background embedding process stopped; retry") from exc

    def _worker(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = ProcessPoolExecutor(
                    max_workers=1,
                    mp_context=multiprocessing.get_context("spawn"),
                    initializer=_start,
                    initargs=(self._factory, os.getpid()),
                )
            return self._executor


def _start(factory: Callable[[], EmbeddingBackend], parent: int) -> None:
    """In the worker process: gone with the server, the lowest CPU priority, then the model."""
    global _model
    _die_with(parent)
    lowered = False
    if hasattr(os, "sched_setscheduler") and hasattr(os, "SCHED_IDLE"):
        with contextlib.suppress(OSError):
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
            lowered = True
    if not lowered and hasattr(os, "nice"):
        with contextlib.suppress(OSError):
            os.nice(19)
    _model = factory()


def _die_with(parent: int) -> None:
    """Linux: the kernel kills this process when the server's thread that started it ends,
    so a server killed with SIGKILL leaves no worker behind (holding its stderr open, say)."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # it ended before the line above
        os._exit(1)


def _ready() -> bool:
    assert _model is not None
    _model.load()
    return True


def _embed(texts: list[str]) -> list[list[float]]:
    assert _model is not None
    return _model.embed_batch(texts)


def _whoami() -> tuple[int, int]:
    policy = os.sched_getscheduler(0) if hasattr(os, "sched_getscheduler") else -1
    return os.getpid(), policy
