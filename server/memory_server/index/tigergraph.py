"""The TigerGraph vector index: the memory vectors live in the user's TigerGraph (>= 4.2).

One vertex type, `MemoryEmbedding`, keyed by fact version id, carries the scope hash, the
bitemporal bounds (epoch microseconds; an open bound is `OPEN_END`) and a COSINE vector
attribute. Search runs the installed query `Memory_search`, which pre-filters the candidate set
by scope and by the as-of predicate and only then runs `vectorSearch` over it — the same
semantics as the embedded pgvector index. All GSQL text is fixed module constants; the only
substituted values are the configured graph name (validated as an identifier) and the
dimension (an int). Every value that comes from users travels as a query parameter.

Wire calls (pyTigerGraph 2.0.5, AsyncTigerGraphConnection):
  upsert       POST /restpp/graph/{graph}                 (one per batch of `batch_size`)
  delete/purge/count/search/vectors
               POST /restpp/query/{graph}/Memory_*        (one per call; JSON parameters)
  install      GET /restpp/version, GET /gsql/v1/schema/graphs/{graph},
               GET /restpp/endpoints/{graph}?dynamic=true, POST /gsql/v1/statements
  token        POST /gsql/v1/tokens (gsql_secret, or automatic on 401 with username/password)
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import re
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import aiohttp
from pyTigerGraph import AsyncTigerGraphConnection  # type: ignore[import-untyped]
from pyTigerGraph.common.exception import TigerGraphException  # type: ignore[import-untyped]

from memory_client.schema_names import (
    MEMORY_QUERIES,
    MEMORY_VECTOR_ATTRIBUTE,
    MEMORY_VERTEX,
    Q_COUNT_SCOPE,
    Q_DELETE_IDS,
    Q_PURGE_SCOPE,
    Q_SEARCH,
    Q_VECTORS,
)
from memory_server.memory.errors import Unavailable
from memory_server.memory.ports import AsOf, VectorHit, VectorRecord

log = logging.getLogger(__name__)

T = TypeVar("T")

MIN_VERSION = (4, 2)
# 9999-12-31T23:59:59Z in epoch microseconds: the "still open" end of an interval.
OPEN_END = 253_402_300_799_000_000
DEFAULT_BATCH = 256
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")

# ---------------------------------------------------------------------------------------------
# GSQL. `{graph}` and `{dimension}` are the only substitutions (validated config values).

GSQL_ADD_VERTEX = """USE GRAPH {graph}
CREATE SCHEMA_CHANGE JOB Memory_add_vertex FOR GRAPH {graph} {{
  ADD VERTEX MemoryEmbedding (PRIMARY_ID version_id STRING, scope_hash STRING, valid_from INT,
    valid_to INT, recorded_at INT, superseded_at INT) WITH primary_id_as_attribute="true";
}}
RUN SCHEMA_CHANGE JOB Memory_add_vertex
DROP JOB Memory_add_vertex
"""

GSQL_ADD_VECTOR = """USE GRAPH {graph}
CREATE SCHEMA_CHANGE JOB Memory_add_vector FOR GRAPH {graph} {{
  ALTER VERTEX MemoryEmbedding
    ADD VECTOR ATTRIBUTE embedding(DIMENSION={dimension}, METRIC="COSINE");
}}
RUN SCHEMA_CHANGE JOB Memory_add_vector
DROP JOB Memory_add_vector
"""

# The as-of belief predicate, the same as pgvector's:
#   recorded_at <= tx_time < superseded_at  and  valid_from <= valid_time < valid_to.
GSQL_QUERIES: dict[str, str] = {
    Q_SEARCH: """CREATE OR REPLACE QUERY Memory_search(STRING scope, LIST<FLOAT> qv, INT k,
    INT valid_time, INT tx_time) FOR GRAPH {graph} {{
  MapAccum<VERTEX, FLOAT> @@d;
  SumAccum<FLOAT> @distance;
  c = {{MemoryEmbedding.*}};
  c = SELECT v FROM c:v
      WHERE v.scope_hash == scope
        AND v.recorded_at <= tx_time AND tx_time < v.superseded_at
        AND v.valid_from <= valid_time AND valid_time < v.valid_to;
  r = vectorSearch({{MemoryEmbedding.embedding}}, qv, k, {{candidate_set: c, distance_map: @@d}});
  r = SELECT v FROM r:v POST-ACCUM v.@distance = @@d.get(v);
  PRINT r[r.@distance AS distance];
}}""",
    Q_DELETE_IDS: """CREATE OR REPLACE QUERY Memory_delete_ids(SET<STRING> ids) FOR GRAPH {graph} {{
  s = to_vertex_set(ids, "MemoryEmbedding");
  DELETE v FROM s:v;
  PRINT s.size() AS deleted;
}}""",
    Q_PURGE_SCOPE: """CREATE OR REPLACE QUERY Memory_purge_scope(STRING scope) FOR GRAPH {graph} {{
  s = {{MemoryEmbedding.*}};
  s = SELECT v FROM s:v WHERE v.scope_hash == scope;
  DELETE v FROM s:v;
  PRINT s.size() AS deleted;
}}""",
    Q_COUNT_SCOPE: """CREATE OR REPLACE QUERY Memory_count_scope(STRING scope) FOR GRAPH {graph} {{
  SumAccum<INT> @@n;
  s = {{MemoryEmbedding.*}};
  s = SELECT v FROM s:v WHERE v.scope_hash == scope ACCUM @@n += 1;
  PRINT @@n AS n;
}}""",
    Q_VECTORS: """CREATE OR REPLACE QUERY Memory_vectors(SET<STRING> ids) FOR GRAPH {graph} {{
  s = to_vertex_set(ids, "MemoryEmbedding");
  PRINT s WITH VECTOR;
}}""",
}
GSQL_INSTALL = "USE GRAPH {graph}\nINSTALL QUERY {names}\n"

# What TigerGraph's GSQL text output says when a statement failed (gsql() never raises).
_GSQL_FAILURES = (
    'Encountered "',
    "SEMANTIC ERROR",
    "Syntax Error",
    "Failed to",
    "does not exist",
    "is not a valid",
    "Invalid syntax",
    "rror:",
    "failed",
)


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


def _micros(t: datetime | None, default: int) -> int:
    if t is None:
        return default
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    delta = t - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _now_micros() -> int:
    return _micros(datetime.now(UTC), 0)


def _check_graph(graph: str) -> str:
    if not _IDENT.match(graph):
        raise ValueError(f"not a TigerGraph graph name: {graph!r}")
    return graph


def _connect(args: ConnArgs) -> Any:
    _check_graph(args.graph)
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


def _status_of(exc: BaseException) -> int | None:
    status = getattr(exc, "status", None)
    return status if isinstance(status, int) else None


class _Client:
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


def _printed(results: list[dict[str, Any]], key: str) -> Any:
    for item in results:
        if isinstance(item, dict) and key in item:
            return item[key]
    raise TigerGraphIndexError(f"TigerGraph reply lacks {key!r}: {results!r}")


class TigerGraphIndex:
    def __init__(
        self,
        host: str,
        graph: str,
        *,
        token: str | None = None,
        gsql_secret: str | None = None,
        username: str | None = None,
        password: str | None = None,
        dimension: int,
        timeout_s: float,
        tls_verify: bool = True,
        batch_size: int = DEFAULT_BATCH,
    ) -> None:
        self._args = ConnArgs(
            host, graph, token, gsql_secret, username, password, timeout_s, tls_verify
        )
        self._dimension = dimension
        self._batch = max(1, batch_size)
        self._client = _Client(self._args)

    @property
    def name(self) -> str:
        return "tigergraph"

    @property
    def conn_args(self) -> ConnArgs:
        return self._args

    async def aclose(self) -> None:
        await self._client.aclose()

    async def install_schema(self) -> bool:
        return await install_schema(self._args, self._dimension)

    async def upsert(self, records: Sequence[VectorRecord]) -> None:
        for start in range(0, len(records), self._batch):
            chunk = records[start : start + self._batch]
            by_id: dict[str, tuple[str, dict[str, Any]]] = {}
            for r in chunk:
                if len(r.vector) != self._dimension:
                    raise ValueError(
                        f"vector of {len(r.vector)} dimensions; the index holds {self._dimension}"
                    )
                by_id[r.version_id] = (
                    r.version_id,
                    {
                        "scope_hash": r.scope_hash,
                        "valid_from": _micros(r.valid_from, 0),
                        "valid_to": _micros(r.valid_to, OPEN_END),
                        "recorded_at": _micros(r.recorded_at, 0),
                        "superseded_at": _micros(r.superseded_at, OPEN_END),
                        MEMORY_VECTOR_ATTRIBUTE: [float(x) for x in r.vector],
                    },
                )
            batch = list(by_id.values())

            async def send(batch: list[tuple[str, dict[str, Any]]] = batch) -> int:
                return int(await self._client.conn.upsertVertices(MEMORY_VERTEX, batch))

            accepted = await self._client.call("upsert", send)
            if accepted != len(batch):
                raise TigerGraphIndexError(
                    f"TigerGraph accepted {accepted} of {len(batch)} {MEMORY_VERTEX} vertices"
                )

    async def delete(self, version_ids: Sequence[str]) -> None:
        for start in range(0, len(version_ids), self._batch):
            ids = list(dict.fromkeys(version_ids[start : start + self._batch]))
            await self._client.query(Q_DELETE_IDS, {"ids": ids})

    async def purge_scope(self, scope_hash: str) -> None:
        await self._client.query(Q_PURGE_SCOPE, {"scope": scope_hash})

    async def search(
        self, scope_hash: str, vector: Sequence[float], k: int, as_of: AsOf
    ) -> list[VectorHit]:
        if k <= 0:
            return []
        now = _now_micros()
        res = await self._client.query(
            Q_SEARCH,
            {
                "scope": scope_hash,
                "qv": [float(x) for x in vector],
                "k": int(k),
                "valid_time": _micros(as_of.valid_time, now),
                "tx_time": _micros(as_of.transaction_time, now),
            },
        )
        hits = [
            VectorHit(str(v["v_id"]), 1.0 - float(v["attributes"]["distance"]))
            for v in _printed(res, "r")
        ]
        hits.sort(key=lambda h: (-h.cosine, h.version_id))
        return hits[:k]

    async def count(self, scope_hash: str) -> int:
        res = await self._client.query(Q_COUNT_SCOPE, {"scope": scope_hash})
        return int(_printed(res, "n"))

    async def vectors(self, version_ids: Sequence[str]) -> dict[str, list[float]]:
        out: dict[str, list[float]] = {}
        for start in range(0, len(version_ids), self._batch):
            ids = list(dict.fromkeys(version_ids[start : start + self._batch]))
            res = await self._client.query(Q_VECTORS, {"ids": ids})
            for v in _printed(res, "s"):
                vec = v.get("attributes", {}).get(MEMORY_VECTOR_ATTRIBUTE)
                if vec is not None:
                    out[str(v["v_id"])] = [float(x) for x in vec]
        return out


# ---------------------------------------------------------------------------------------------
# Schema installation


def _parse_version(text: str) -> tuple[int, ...]:
    parts = re.findall(r"\d+", text)
    return tuple(int(p) for p in parts[:3])


def _check_gsql(output: Any, what: str) -> str:
    text = str(output or "")
    if any(marker in text for marker in _GSQL_FAILURES):
        raise TigerGraphIndexError(f"TigerGraph {what} failed: {text.strip()[:2000]}")
    return text


def _has_vector(vertex: dict[str, Any]) -> bool:
    for key in ("EmbeddingAttributes", "VectorAttributes"):
        for attr in vertex.get(key) or []:
            if isinstance(attr, dict) and attr.get("Name") == MEMORY_VECTOR_ATTRIBUTE:
                return True
    return False


def _vector_dimension(vertex: dict[str, Any]) -> int | None:
    for key in ("EmbeddingAttributes", "VectorAttributes"):
        for attr in vertex.get(key) or []:
            if isinstance(attr, dict) and attr.get("Name") == MEMORY_VECTOR_ATTRIBUTE:
                dim = attr.get("Dimension")
                return int(dim) if dim is not None else None
    return None


async def install_schema(conn_args: ConnArgs, dimension: int) -> bool:
    """Creates the memory vertex type, its vector attribute and the Memory_* queries where
    missing. Idempotent; returns whether anything changed. Refuses TigerGraph < 4.2."""
    if not isinstance(dimension, int) or not 1 <= dimension <= 4096:
        raise ValueError(f"vector dimension must be 1..4096, not {dimension!r}")
    graph = _check_graph(conn_args.graph)
    client = _Client(conn_args)
    changed = False
    try:
        conn = client.conn
        ver_text = str(await client.call("version", lambda: conn.getVer()))
        version = _parse_version(ver_text)
        if version[:2] < MIN_VERSION:
            raise TigerGraphIndexError(
                f"TigerGraph {ver_text} has no vector attributes; the memory vector index needs "
                f"TigerGraph >= {MIN_VERSION[0]}.{MIN_VERSION[1]}"
            )
        schema = await client.call("schema", lambda: conn.getSchema(udts=False, force=True))
        vertex = next(
            (
                v
                for v in (schema or {}).get("VertexTypes", [])
                if isinstance(v, dict) and v.get("Name") == MEMORY_VERTEX
            ),
            None,
        )
        if vertex is None:
            text = GSQL_ADD_VERTEX.format(graph=graph)
            _check_gsql(await client.call("schema change", lambda: conn.gsql(text)), "add vertex")
            changed = True
        if vertex is None or not _has_vector(vertex):
            text = GSQL_ADD_VECTOR.format(graph=graph, dimension=dimension)
            _check_gsql(await client.call("schema change", lambda: conn.gsql(text)), "add vector")
            changed = True
        else:
            stored = _vector_dimension(vertex)
            if stored is not None and stored != dimension:
                raise TigerGraphIndexError(
                    f"{MEMORY_VERTEX}.{MEMORY_VECTOR_ATTRIBUTE} holds {stored}-dimensional "
                    f"vectors, the embedder makes {dimension}; re-embed"
                )
        endpoints = await client.call("endpoints", lambda: conn.getEndpoints(dynamic=True))
        prefix = f"/query/{graph}/"
        installed = {
            ep.split(prefix, 1)[1]
            for ep in (endpoints or {})
            if isinstance(ep, str) and prefix in ep
        }
        missing = [q for q in MEMORY_QUERIES if q not in installed]
        if missing:
            create = f"USE GRAPH {graph}\n" + "\n".join(
                GSQL_QUERIES[q].format(graph=graph) for q in missing
            )
            _check_gsql(await client.call("create queries", lambda: conn.gsql(create)), "create")
            install = GSQL_INSTALL.format(graph=graph, names=", ".join(missing))
            _check_gsql(await client.call("install queries", lambda: conn.gsql(install)), "install")
            changed = True
        return changed
    finally:
        await client.aclose()


def _cli(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m memory_server.index.tigergraph")
    sub = parser.add_subparsers(dest="command", required=True)
    inst = sub.add_parser("install-schema", help="create the memory vertex type and queries")
    inst.add_argument("--host", required=True, help="e.g. http://tigergraph:14240")
    inst.add_argument("--graph", required=True)
    inst.add_argument("--token")
    inst.add_argument("--gsql-secret")
    inst.add_argument("--username")
    inst.add_argument("--password")
    inst.add_argument("--dimension", type=int, default=384)
    inst.add_argument("--timeout", type=float, default=600.0)
    inst.add_argument("--no-tls-verify", action="store_true")
    args = parser.parse_args(argv)
    conn_args = ConnArgs(
        args.host,
        args.graph,
        args.token,
        args.gsql_secret,
        args.username,
        args.password,
        args.timeout,
        not args.no_tls_verify,
    )
    try:
        changed = asyncio.run(install_schema(conn_args, args.dimension))
    except (TigerGraphIndexError, Unavailable, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print("installed" if changed else "already installed")
    return 0


if __name__ == "__main__":
    raise SystemExit(_cli())
