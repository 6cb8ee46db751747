"""The wire to TigerGraph: one pyTigerGraph connection with a timeout on every call, the token
fetched on first use, and its failures sorted into retryable (Unavailable) and not."""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import aiohttp
from pyTigerGraph import AsyncTigerGraphConnection  # type: ignore[import-untyped]
from pyTigerGraph.common.exception import TigerGraphException  # type: ignore[import-untyped]

from memory_server.memory.errors import Unavailable

T = TypeVar("T")
log = logging.getLogger(__name__)

# pyTigerGraph raises TigerGraphException for any non-2xx reply whose JSON body says
# "error": true *before* it looks at the status (pytgasync/pyTigerGraphBase.py, _req: the
# `self._error_check(json.loads(body))` ahead of `resp.raise_for_status()`), so the HTTP status
# is lost. Each call records the statuses it saw here (set per call, so concurrent calls in
# other tasks do not mix).
_STATUSES: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar(
    "tigergraph_statuses", default=None
)

# REST++ return codes that retrying can fix. TigerGraph's return-code reference
# (https://docs.tigergraph.com/tigergraph-server/current/reference/return-codes):
#   REST-3002  the query exceeded the server's query timeout (the message reads "exceeded the
#              query timeout threshold (16 seconds) ... Try increase
#              RESTPP.Factory.DefaultQueryTimeoutSec or add header GSQL-TIMEOUT").
# Everything else with a code (REST-1000 endpoint missing, REST-2xxx payload, REST-10016 auth,
# REST-30001 bad parameter, REST-10020 licence expired) stays permanent.
TRANSIENT_CODES = frozenset({"REST-3002"})
# Auth failures: pyTigerGraph's own test (common/auth.py, _is_auth_failure_response).
AUTH_CODES = frozenset({"REST-10016"})
_TRANSIENT_MESSAGES = re.compile(
    r"service unavailable|temporarily unavailable|try again|is not ready|timed out|timeout",
    re.IGNORECASE,
)


def _retryable_status(status: int) -> bool:
    return status >= 500 or status in (408, 429)


_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


class TigerGraphIndexError(RuntimeError):
    """A TigerGraph answer that retrying will not fix (bad schema, auth, GSQL error)."""


class TigerGraphAuthExpired(TigerGraphIndexError):
    """A configured apiToken was refused: fetch a new one where credentials allow."""


def classify(what: str, exc: Exception, status: int | None, user_token: bool = False) -> Exception:
    """Unavailable for what retrying can fix (a 5xx/408/429 status, a transient REST++ code,
    an outage message), TigerGraphAuthExpired for a refused configured token, else
    TigerGraphIndexError."""
    code = str(getattr(exc, "code", "") or "")
    message = str(getattr(exc, "message", exc))
    where = f"HTTP {status}, " if status is not None else ""
    detail = f"TigerGraph {what}: {message} ({where}{code or 'no code'})"
    if status is not None and _retryable_status(status):
        return Unavailable(detail)
    if code in TRANSIENT_CODES:
        return Unavailable(detail)
    if user_token and (code in AUTH_CODES or status == 401):
        return TigerGraphAuthExpired(detail)
    if not code and _TRANSIENT_MESSAGES.search(message):
        return Unavailable(detail)
    return TigerGraphIndexError(detail)


@dataclass(frozen=True)
class ConnArgs:
    host: str
    graph: str
    token: str | None = None
    gsql_secret: str | None = None
    username: str | None = None
    password: str | None = None
    timeout_s: float = 30.0
    tls_verify: bool = True


def check_graph(graph: str) -> str:
    if not _IDENT.match(graph):
        raise ValueError(f"not a TigerGraph graph name: {graph!r}")
    return graph


def _connect(args: ConnArgs) -> Any:
    check_graph(args.graph)
    kwargs: dict[str, Any] = {"host": args.host, "graphname": args.graph}
    # All configured credentials go to the connection: a configured apiToken is used first,
    # and the secret or username/password fetch a new token when it is refused.
    if args.token:
        kwargs["apiToken"] = args.token
    if args.gsql_secret:
        kwargs["gsqlSecret"] = args.gsql_secret
    if args.username is not None:
        kwargs["username"] = args.username
        kwargs["password"] = args.password or ""
    conn = AsyncTigerGraphConnection(**kwargs)
    # pyTigerGraph 2.0.5 turns certificate checks off for every https host; its aiohttp
    # session reads `verify` when it is made (on first request), so set what was asked for.
    conn.verify = bool(args.tls_verify)
    do_request = conn._do_request

    async def recording(*a: Any, **kw: Any) -> Any:
        status, body, resp = await do_request(*a, **kw)
        seen = _STATUSES.get()
        if seen is not None:
            seen.append(int(status))
        return status, body, resp

    conn._do_request = recording
    return conn


class Client:
    """One pyTigerGraph connection with timeouts, lazy token and error mapping."""

    def __init__(self, args: ConnArgs) -> None:
        self.args = args
        self.conn = _connect(args)
        # With a secret or a user's password and no token, a token is fetched before the first
        # request: REST++ takes tokens (a user's Basic auth only on some versions).
        self._token_ready = bool(args.token) or not self._can_refresh()
        self._lock = asyncio.Lock()

    async def call(
        self, what: str, fn: Callable[[], Awaitable[T]], timeout_s: float | None = None
    ) -> T:
        try:
            return await self._call_once(what, fn, timeout_s)
        except TigerGraphAuthExpired:
            if not self._can_refresh():
                raise TigerGraphIndexError(
                    f"TigerGraph {what}: the token was refused (REST-10016) and no gsql_secret "
                    "or username/password is configured to fetch a new one"
                ) from None
            log.info("TigerGraph refused the token for %s; fetching a new one", what)
            async with self._lock:
                self._token_ready = False
            try:
                return await self._call_once(what, fn, timeout_s)
            except TigerGraphAuthExpired:
                raise TigerGraphIndexError(
                    f"TigerGraph {what}: a new token was refused too; check the configured "
                    "gsql_secret or username/password"
                ) from None

    def _can_refresh(self) -> bool:
        return bool(self.args.gsql_secret) or self.args.username is not None

    async def _refresh_token(self) -> None:
        if self.args.gsql_secret:
            await self.conn.getToken(self.args.gsql_secret)
            return
        # pyTigerGraph 2.0.5 sends the credential the connection holds whatever the request's
        # authMode (common/base.py, _prep_req uses _cached_auth): with a refused token still
        # set, the token request would carry it instead of the user's Basic auth. Drop it.
        self.conn.apiToken = ""
        self.conn._refresh_auth_headers()
        await self.conn.getToken()

    async def _call_once(
        self, what: str, fn: Callable[[], Awaitable[T]], timeout_s: float | None
    ) -> T:
        limit = self.args.timeout_s if timeout_s is None else timeout_s
        seen: list[int] = []
        reset = _STATUSES.set(seen)
        try:
            async with asyncio.timeout(limit):
                if not self._token_ready:
                    async with self._lock:
                        if not self._token_ready:
                            await self._refresh_token()
                            self._token_ready = True
                return await fn()
        except TimeoutError as exc:
            raise Unavailable(f"TigerGraph {what}: no answer in {limit}s") from exc
        except aiohttp.ClientResponseError as exc:
            if _retryable_status(exc.status):
                raise Unavailable(f"TigerGraph {what}: HTTP {exc.status}") from exc
            if exc.status == 401 and self.args.token:
                raise TigerGraphAuthExpired(what) from exc
            raise TigerGraphIndexError(
                f"TigerGraph {what}: HTTP {exc.status} {exc.message}"
            ) from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise Unavailable(f"TigerGraph {what}: {exc}") from exc
        except TigerGraphException as exc:
            raise classify(what, exc, seen[-1] if seen else None, bool(self.args.token)) from exc
        finally:
            _STATUSES.reset(reset)

    async def query(self, name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        async def run() -> list[dict[str, Any]]:
            res = await self.conn.runInstalledQuery(name, params, usePost=True)
            return list(res or [])

        return await self.call(name, run)

    async def upsert(self, what: str, data: dict[str, Any], **flags: bool) -> dict[str, Any]:
        """One REST++ upsert, `POST /restpp/graph/{graph}` (docs.tigergraph.com, REST API
        "Upsert data to graph"), with its flags (`vertex_must_exist`, `update_vertex_only`, ...)
        in the query string; the reply's counts (`accepted_vertices`, `accepted_edges`).

        upsertData(vertexMustExist=True) itself cannot send a flag: pyTigerGraph 2.0.5 puts a
        Python bool in the query string, which aiohttp refuses (TypeError). Its own request
        path, with the flag spelt as REST++ spells it, can."""

        async def send() -> Any:
            conn = self.conn
            res = await conn._req(
                "POST",
                f"{conn.restppUrl}/graph/{conn.graphname}",
                data=json.dumps(data),
                params={k: "true" if v else "false" for k, v in flags.items()},
            )
            return res[0] if isinstance(res, list) and res else res

        reply = await self.call(what, send)
        return reply if isinstance(reply, dict) else {}

    async def aclose(self) -> None:
        await self.conn.aclose()


def printed(results: list[dict[str, Any]], key: str) -> Any:
    for item in results:
        if isinstance(item, dict) and key in item:
            return item[key]
    raise TigerGraphIndexError(f"TigerGraph reply lacks {key!r}: {results!r}")
