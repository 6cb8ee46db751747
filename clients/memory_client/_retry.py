"""Which calls may be repeated after UNAVAILABLE (or a CANCELLED the client did not cause), and
the deadline and back-off of one call."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import Any

import grpc

from memory_client._config import ClientConfig
from memory_client.errors import error_for

__all__ = [
    "MAX_BACKOFF_S",
    "RETRIED_CODES",
    "Attempts",
    "RetryRule",
    "all_have_message_ids",
    "always",
    "has_message_id",
    "never",
]

# The name the clients' module has always logged retries under: logging configurations (and the
# tests) select it.
log = logging.getLogger("memory_client.client")

MAX_BACKOFF_S = 5.0

# UNAVAILABLE, and CANCELLED that this client did not cause (a call it cancels raises
# CancelledError, never a status): gRPC itself cancels the calls that reached a stopping
# server's transport in its last milliseconds but not yet its handler, which the server's own
# shutdown answers UNAVAILABLE for every other call. Either way nothing was done, or an
# idempotent call finds what it did by its id.
RETRIED_CODES = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED})

#: Whether a given request may be sent again after UNAVAILABLE.
RetryRule = Callable[[Any], bool]


def always(request: Any) -> bool:
    return True


def never(request: Any) -> bool:
    return False


def has_message_id(request: Any) -> bool:
    return bool(request.message_id)


def all_have_message_ids(request: Any) -> bool:
    return bool(request.messages) and all(m.message_id for m in request.messages)


class Attempts:
    """The retry plan of one call: the overall deadline and the back-off between attempts."""

    def __init__(self, method: str, retryable: bool, timeout_s: float, config: ClientConfig):
        self._deadline = time.monotonic() + timeout_s
        self._retryable = retryable
        self._config = config
        self._method = method
        self.retries = 0

    def timeout(self) -> float:
        """Time left for the next attempt (never zero: gRPC would treat it as no deadline)."""
        return max(self._deadline - time.monotonic(), 0.001)

    def backoff_after(self, exc: grpc.RpcError) -> float:
        """Seconds to sleep before the next attempt; raises the MemoryClientError for `exc` when
        it is final."""
        delay = self._delay_before_retry(exc.code())
        if delay is None:
            raise error_for(exc.code(), exc.details() or "", self._method) from exc
        return delay

    def _delay_before_retry(self, code: grpc.StatusCode) -> float | None:
        if code not in RETRIED_CODES or not self._retryable:
            return None
        if self.retries >= self._config.retries:
            return None
        base = min(self._config.backoff_s * (2**self.retries), MAX_BACKOFF_S)
        delay = random.uniform(base / 2, base)
        if time.monotonic() + delay >= self._deadline:
            return None
        self.retries += 1
        log.debug(
            "%s: %s; retry %d/%d in %.3fs",
            self._method,
            code.name,
            self.retries,
            self._config.retries,
            delay,
        )
        return delay
