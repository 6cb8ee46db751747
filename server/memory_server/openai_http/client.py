"""The HTTP client every OpenAI-compatible adapter shares (the embedder, the summarizer, the
extractor's and the reconciler's LLM calls): `POST {base_url}/{path}` with a JSON body, the
JSON answer back.

* One budget per call: every attempt, every wait between attempts and every byte of the
  answer fit in it (a server that drips its answer a byte at a time is cut off too). It is
  `timeout_s` unless the caller passes less as `budget_s`. Connecting waits at most
  `connect_timeout_s` of it, so that a host that swallows packets leaves time for a retry.
* Retries with back-off and jitter, honouring Retry-After: see `retry.RetryPolicy`.
* At most `max_response_bytes` of answer are read.
* The API key is sent as a bearer token when one is configured; nothing comes from the
  environment.
* Failures are domain errors whose messages are ours (the URL, a status, an exception type),
  never the endpoint's text, which may echo the request: Unavailable (no answer in time, no
  connection, HTTP 408 or 5xx), Overloaded (HTTP 429), EndpointError (any other status, an
  answer that is not JSON or too large).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from memory_server.lifecycle import Lifecycle
from memory_server.memory.errors import MemoryServiceError, Overloaded, Unavailable
from memory_server.openai_http.retry import (
    RETRY_STATUSES,
    RetryPolicy,
    Transient,
    retry_after_seconds,
)

DEFAULT_MAX_RESPONSE_BYTES = 1 << 20

# Failures of the connection itself, before or while the answer comes: another attempt may
# find the server (restarted, scaled, its keep-alive connection closed under us).
_CONNECTION_ERRORS = (httpx.NetworkError, httpx.RemoteProtocolError, httpx.ConnectTimeout)


class EndpointError(MemoryServiceError):
    """The endpoint answered, but not usably: a status no retry fixes (400, 401, 404, ...) or
    an answer that is not what the protocol says. A configuration problem or a broken
    endpoint, not a transient one."""


class OpenAICompatibleClient(Lifecycle):
    """JSON over HTTP to one OpenAI-compatible base URL. The connection pool opens on `start`
    or on the first call, and closes on `close` (idempotent; a later call opens it again)."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        timeout_s: float,
        *,
        retry: RetryPolicy | None = None,
        connect_timeout_s: float = 5.0,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        if timeout_s <= 0 or connect_timeout_s <= 0:
            raise ValueError("timeouts must be positive")
        self._base_url = base_url.rstrip("/")
        self._headers = {"Accept": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self.timeout_s = timeout_s
        self._retry = retry or RetryPolicy()
        self._connect_timeout_s = connect_timeout_s
        self._max_response_bytes = max_response_bytes
        self._client: httpx.AsyncClient | None = None

    def url(self, path: str) -> str:
        return f"{self._base_url}/{path.lstrip('/')}"

    async def start(self) -> None:
        if self._client is None:
            self._client = httpx.AsyncClient(headers=self._headers)

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def post(self, path: str, body: dict[str, Any], *, budget_s: float | None = None) -> Any:
        """The decoded JSON answer of `POST {base_url}/{path}`, within `budget_s` seconds
        (at most `timeout_s`)."""
        budget = self.timeout_s if budget_s is None else min(budget_s, self.timeout_s)
        url = self.url(path)
        if budget <= 0:
            raise Unavailable(f"{url}: no time left for the call")
        await self.start()
        deadline = asyncio.get_running_loop().time() + budget
        try:
            async with asyncio.timeout_at(deadline):
                return await self._retry.retrying(budget)(self._attempt, url, body, deadline)
        except Transient as failure:
            raise failure.error from None
        except (TimeoutError, httpx.TimeoutException) as exc:
            raise Unavailable(
                f"{url} timed out: it did not answer in {budget:g}s ({type(exc).__name__})"
            ) from None

    async def _attempt(self, url: str, body: dict[str, Any], deadline: float) -> Any:
        client = self._client
        if client is None:  # closed while the call waited to retry
            raise Unavailable(f"{url}: the client is closed")
        left = max(deadline - asyncio.get_running_loop().time(), 0.001)
        timeout = httpx.Timeout(left, connect=min(left, self._connect_timeout_s))
        try:
            async with client.stream("POST", url, json=body, timeout=timeout) as response:
                if not response.is_success:
                    raise _status_error(url, response)
                raw = bytearray()
                async for chunk in response.aiter_bytes():
                    raw += chunk
                    if len(raw) > self._max_response_bytes:
                        raise EndpointError(
                            f"{url}: response too large (over {self._max_response_bytes} bytes)"
                        )
        except _CONNECTION_ERRORS as exc:
            raise Transient(Unavailable(f"{url} is unreachable ({type(exc).__name__})")) from None
        except httpx.TimeoutException:
            raise  # the budget is spent: `post` says so
        except httpx.HTTPError as exc:
            raise EndpointError(f"{url}: {type(exc).__name__}") from None
        try:
            return json.loads(raw)
        except ValueError:
            raise EndpointError(f"{url}: response is not JSON") from None


def _status_error(url: str, response: httpx.Response) -> Exception:
    status = response.status_code
    error: MemoryServiceError
    if status == 429:
        error = Overloaded(f"{url} is rate limiting (HTTP 429)")
    elif status == 408 or status >= 500:
        error = Unavailable(f"{url} answered HTTP {status}")
    else:
        return EndpointError(f"{url} answered HTTP {status}")
    if status in RETRY_STATUSES:
        return Transient(error, retry_after_seconds(response.headers.get("Retry-After")))
    return error
