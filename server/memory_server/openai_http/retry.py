"""When a call to an OpenAI-compatible endpoint is tried again, and how long it waits first.

Retried: what says "not now" rather than "no": a connection that could not be made or broke
before the answer, and HTTP 408, 429, 502, 503 and 504. HTTP 500 is not: from vLLM, llama.cpp
server or Ollama it usually means this very request broke the model server (a prompt its chat
template cannot render, a batch it has no memory for), and a retry would pay for the same
prompt again to get the same answer. Other statuses are configuration problems.

The wait before each retry is what the endpoint asked for in `Retry-After` (seconds or an HTTP
date), else exponential with full jitter: uniform in [0, first_wait_s], then [0, 2 x], ...,
capped at `max_wait_s`. A call never sleeps past its budget: when the next attempt would start
with less than a quarter of the budget left (at most 1 s kept back), the last error is raised
at once (a 429 with `Retry-After: 120` fails now, not in 2 minutes), so the caller learns the
real reason instead of a timeout.
"""

from __future__ import annotations

import email.utils
import logging
import time
from dataclasses import dataclass

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    stop_after_attempt,
    stop_before_delay,
    wait_random_exponential,
)

from memory_server.memory.errors import MemoryServiceError

log = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({408, 429, 502, 503, 504})


class Transient(Exception):
    """An attempt failed in a way a later attempt may not: carries the error the caller gets
    if no attempt is left, and the wait the endpoint asked for (None: it did not say)."""

    def __init__(self, error: MemoryServiceError, retry_after_s: float | None = None) -> None:
        super().__init__(str(error))
        self.error = error
        self.retry_after_s = retry_after_s


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """The wait a `Retry-After` header asks for: delay-seconds or an HTTP date (RFC 9110
    10.2.3); None when absent or unreadable. Never negative."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    return max(0.0, seconds) if seconds == seconds else None  # NaN: unreadable


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """At most `max_attempts` attempts in all (1 = never retry)."""

    max_attempts: int = 3
    first_wait_s: float = 0.5
    max_wait_s: float = 8.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if not 0 <= self.first_wait_s <= self.max_wait_s:
            raise ValueError("need 0 <= first_wait_s <= max_wait_s")

    def retrying(self, budget_s: float) -> AsyncRetrying:
        """Tenacity's loop for one call whose attempts and waits share `budget_s`."""
        backoff = wait_random_exponential(multiplier=self.first_wait_s, max=self.max_wait_s)

        def wait(state: RetryCallState) -> float:
            failure = state.outcome.exception() if state.outcome is not None else None
            if isinstance(failure, Transient) and failure.retry_after_s is not None:
                return failure.retry_after_s
            return float(backoff(state))

        def before_sleep(state: RetryCallState) -> None:
            failure = state.outcome.exception() if state.outcome is not None else None
            # The failure's text is ours (the URL and a status or an exception type).
            log.info(
                "%s; attempt %d of %d in %.2fs",
                failure,
                state.attempt_number + 1,
                self.max_attempts,
                state.upcoming_sleep,
            )

        return AsyncRetrying(
            retry=retry_if_exception_type(Transient),
            wait=wait,
            stop=stop_after_attempt(self.max_attempts)
            | stop_before_delay(budget_s - min(budget_s / 4, 1.0)),
            before_sleep=before_sleep,
            reraise=True,
        )


NO_RETRIES = RetryPolicy(max_attempts=1)
