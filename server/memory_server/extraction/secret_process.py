"""The secret filter with long texts scanned in a worker process.

DetectSecretsFilter is pure Python and regular expressions, holding the GIL throughout (its
cost per KB: bench/README.md, "Figures behind the code"). Run on a worker thread it is off the
event loop but not out of its way: the loop waits for the GIL at every wake-up, and a large
import then slows every other scope's turns several times over. A worker process has a GIL of
its own.

`ProcessSecretFilter` is a SecretFilter: texts up to `inline_chars` are scanned in the calling
thread as before; a longer one is sent to one worker process (spawned, never forked: the server
runs gRPC threads) and the calling thread waits for it without holding the GIL. Callers already
hand long texts to a worker thread (`asyncio.to_thread`), never the event loop itself. The
process starts on the first long text and is replaced if it dies; a scan whose process died is
done in the calling thread, so a text is never stored unscanned.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import threading
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Final

from memory_server.extraction.secrets import DetectSecretsFilter
from memory_server.memory.ports import Scrubbed

__all__ = ["INLINE_CHARS", "ProcessSecretFilter"]

log = logging.getLogger(__name__)
# The scan worker process runs this much nicer than the server.
SCAN_NICE = 10

# Below this a scan takes a few milliseconds: sending it to the process would cost more.
INLINE_CHARS: Final = 16 * 1024

_worker_filter: DetectSecretsFilter | None = None


def _start_worker() -> None:
    global _worker_filter
    # Long texts are imports and pasted documents: their scan yields the CPU to every other
    # scope's turns (tests/test_no_stall.py), as the background embedding does.
    with contextlib.suppress(OSError, AttributeError):
        os.nice(SCAN_NICE)
    _worker_filter = DetectSecretsFilter()


def _scan(method: str, text: str) -> tuple[str, int]:
    """In the worker: the filter's `scrub` or `redact` of `text`, as plain values."""
    assert _worker_filter is not None, "the worker's initializer builds the filter"
    found = getattr(_worker_filter, method)(text)
    return found.text, found.secrets_found


class ProcessSecretFilter:
    def __init__(self, *, inline_chars: int = INLINE_CHARS) -> None:
        self._local = DetectSecretsFilter()
        self._inline_chars = inline_chars
        self._lock = threading.Lock()
        self._executor: ProcessPoolExecutor | None = None
        self._closed = False

    def scrub(self, text: str) -> Scrubbed:
        return self._scan("scrub", text)

    def redact(self, text: str) -> Scrubbed:
        return self._scan("redact", text)

    @property
    def worker_started(self) -> bool:
        return self._executor is not None

    def close(self) -> None:
        """Stop the worker process (idempotent). Later scans run in the calling thread."""
        with self._lock:
            self._closed = True
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)

    def _scan(self, method: str, text: str) -> Scrubbed:
        executor = self._worker() if len(text) > self._inline_chars else None
        if executor is None:
            return getattr(self._local, method)(text)  # type: ignore[no-any-return]
        try:
            kept, found = executor.submit(_scan, method, text).result()
        except BrokenProcessPool:
            log.warning("the secret-scan worker process died; scanning in this thread")
            with self._lock:
                if self._executor is executor:
                    self._executor = None
            executor.shutdown(wait=False, cancel_futures=True)
            return getattr(self._local, method)(text)  # type: ignore[no-any-return]
        except RuntimeError:  # closed meanwhile: "cannot schedule new futures after shutdown"
            return getattr(self._local, method)(text)  # type: ignore[no-any-return]
        return Scrubbed(text=kept, secrets_found=found)

    def _worker(self) -> ProcessPoolExecutor | None:
        with self._lock:
            if self._executor is None and not self._closed:
                self._executor = ProcessPoolExecutor(
                    max_workers=1,
                    mp_context=multiprocessing.get_context("spawn"),
                    initializer=_start_worker,
                )
            return self._executor
