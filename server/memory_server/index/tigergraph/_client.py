"""The wire to TigerGraph: one pyTigerGraph connection with a timeout on every call, the token
fetched on first use, and its failures sorted into retryable (Unavailable) and not."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import aiohttp
from pyTigerGraph import AsyncTigerGraphConnection  # type: ignore[import-untyped]
from pyTigerGraph.common.exception import TigerGraphException  # type: ignore[import-untyped]

from memory_server.memory.errors import Unavailable

T = TypeVar("T")

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


class TigerGraphIndexError(RuntimeError):
    """A TigerGraph answer that retrying will not fix (bad schema, auth, GSQL error)."""


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
    if args.token:
        kwargs["apiToken"] = args.token
    elif args.gsql_secret:
        kwargs["gsqlSecret"] = args.gsql_secret
    elif args.username is not None:
        kwargs["username"] = args.username
        kwargs["password"] = args.password or ""
    conn = AsyncTigerGraphConnection(**kwargs)
    # pyTigerGraph 2.0.5 turns certificate checks off for every https host; its aiohttp
    # session reads `verify` when it is made (on first request), so set what was asked for.
    conn.verify = bool(args.tls_verify)
    return conn


class Client:
    """One pyTigerGraph connection with timeouts, lazy token and error mapping."""

    def __init__(self, args: ConnArgs) -> None:
        self.args = args
        self.conn = _connect(args)
        self._token_ready = not args.gsql_secret or bool(args.token)
        self._lock = asyncio.Lock()

    async def call(self, what: str, fn: Callable[[], Awaitable[T]]) -> T:
        try:
            async with asyncio.timeout(self.args.timeout_s):
                if not self._token_ready:
                    async with self._lock:
                        if not self._token_ready:
                            await self.conn.getToken(self.args.gsql_secret)
                            self._token_ready = True
                return await fn()
        except TimeoutError as exc:
            raise Unavailable(f"TigerGraph {what}: no answer in {self.args.timeout_s}s") from exc
        except aiohttp.ClientResponseError as exc:
            if exc.status >= 500 or exc.status in (408, 429):
                raise Unavailable(f"TigerGraph {what}: HTTP {exc.status}") from exc
            raise TigerGraphIndexError(
                f"TigerGraph {what}: HTTP {exc.status} {exc.message}"
            ) from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise Unavailable(f"TigerGraph {what}: {exc}") from exc
        except TigerGraphException as exc:
            code = str(getattr(exc, "code", "") or "")
            message = str(getattr(exc, "message", exc))
            if code.startswith("5") or "Service Unavailable" in message:
                raise Unavailable(f"TigerGraph {what}: {message}") from exc
            raise TigerGraphIndexError(f"TigerGraph {what}: {message} ({code})") from exc

    async def query(self, name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        async def run() -> list[dict[str, Any]]:
            res = await self.conn.runInstalledQuery(name, params, usePost=True)
            return list(res or [])

        return await self.call(name, run)

    async def aclose(self) -> None:
        await self.conn.aclose()


def printed(results: list[dict[str, Any]], key: str) -> Any:
    for item in results:
        if isinstance(item, dict) and key in item:
            return item[key]
    raise TigerGraphIndexError(f"TigerGraph reply lacks {key!r}: {results!r}")
