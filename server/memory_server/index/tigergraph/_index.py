"""TigerGraphIndex, the VectorIndex adapter: records become `MemoryEmbedding` upserts (each with
its scope's `MemoryScope` vertex and `MemoryOfScope` edge), searches and deletions become calls
of the installed `Memory_*` queries, batch by batch."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from memory_client import schema_names as names
from memory_client.schema_names import (
    MEMORY_LINK_EDGE,
    MEMORY_SCOPE_EDGE,
    MEMORY_SCOPE_VERTEX,
    MEMORY_VECTOR_ATTRIBUTE,
    MEMORY_VERTEX,
)
from memory_server.index.tigergraph._client import (
    Client,
    ConnArgs,
    TigerGraphIndexError,
    printed,
)
from memory_server.index.tigergraph._schema import install_schema
from memory_server.memory.ports import AsOf, LinkRecord, VectorHit, VectorRecord

# 9999-12-31T23:59:59Z in epoch microseconds: the "still open" end of an interval.
OPEN_END = 253_402_300_799_000_000
DEFAULT_BATCH = 256
# Vector searches in flight for one batch's neighbours.
_NEIGHBOUR_SEARCHES = 8
log = logging.getLogger(__name__)


def _printed_vector(v: dict[str, Any]) -> Any:
    """The memory vector of one vertex printed `WITH VECTOR`. TigerGraph prints vector
    attributes under a separate "Embeddings" object beside "attributes" (ecosys
    tutorials/vector/q3.out:19,34 and q1c.out:19,38: `"Embeddings": {"emb1": [...]}`);
    "attributes" is read only as a fallback."""
    emb = v.get("Embeddings")
    if isinstance(emb, dict) and emb.get(MEMORY_VECTOR_ATTRIBUTE) is not None:
        return emb[MEMORY_VECTOR_ATTRIBUTE]
    attrs = v.get("attributes")
    return attrs.get(MEMORY_VECTOR_ATTRIBUTE) if isinstance(attrs, dict) else None


def _micros(t: datetime | None, default: int) -> int:
    if t is None:
        return default
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    delta = t - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _now_micros() -> int:
    return _micros(datetime.now(UTC), 0)


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
        self._client = Client(self._args)
        # Vectors upserted since the HNSW index last reported itself rebuilt (see
        # vector_status): searches may not see them yet.
        self._pending_since: float | None = None
        self.upserts_pending_index = 0
        self.vectors_missing = 0

    @property
    def name(self) -> str:
        return "tigergraph"

    @property
    def conn_args(self) -> ConnArgs:
        return self._args

    async def aclose(self) -> None:
        await self._client.aclose()

    async def install_schema(self, install_timeout_s: float | None = None) -> bool:
        return await install_schema(self._args, self._dimension, install_timeout_s)

    async def upsert(
        self, records: Sequence[VectorRecord], links: Sequence[LinkRecord] = ()
    ) -> None:
        """Vertices, each with its scope's MemoryScope vertex and MemoryOfScope edge, and the
        links between them as MemoryLink edges, in one request per batch: the REST++ upsert
        takes both, `{"vertices": {type: {id: attrs}}, "edges": {source type: {source id:
        {edge type: {target type: {target id: attrs}}}}}}` (docs.tigergraph.com, REST API
        "Upsert data to graph"; pyTigerGraph upsertData). `vertex_must_exist` keeps an edge
        whose end was deleted meanwhile from creating an empty vertex."""
        for start in range(0, max(len(records), 1), self._batch):
            chunk = records[start : start + self._batch]
            # The links ride with the first request of the batch.
            chunk_links = links if start == 0 else ()
            if not chunk and not chunk_links:
                return
            by_id: dict[str, dict[str, Any]] = {}
            members: dict[str, dict[str, dict[str, Any]]] = {}
            for r in chunk:
                if len(r.vector) != self._dimension:
                    raise ValueError(
                        f"vector of {len(r.vector)} dimensions; the index holds {self._dimension}"
                    )
                by_id[r.version_id] = {
                    "scope_hash": {"value": r.scope_hash},
                    "valid_from": {"value": _micros(r.valid_from, 0)},
                    "valid_to": {"value": _micros(r.valid_to, OPEN_END)},
                    "recorded_at": {"value": _micros(r.recorded_at, 0)},
                    "superseded_at": {"value": _micros(r.superseded_at, OPEN_END)},
                    MEMORY_VECTOR_ATTRIBUTE: {"value": [float(x) for x in r.vector]},
                }
                members.setdefault(r.scope_hash, {})[r.version_id] = {}
            link_edges: dict[str, dict[str, Any]] = {}
            for link in chunk_links:
                targets = link_edges.setdefault(link.source_version_id, {MEMORY_LINK_EDGE: {}})
                targets[MEMORY_LINK_EDGE].setdefault(MEMORY_VERTEX, {})[link.target_version_id] = {
                    "score": {"value": float(link.score)},
                    "recorded_at": {"value": _micros(link.recorded_at, 0)},
                    "superseded_at": {"value": _micros(link.superseded_at, OPEN_END)},
                }
            data: dict[str, Any] = {"vertices": {MEMORY_VERTEX: by_id}}
            edges: dict[str, Any] = {}
            if members:
                data["vertices"][MEMORY_SCOPE_VERTEX] = {scope: {} for scope in members}
                edges[MEMORY_SCOPE_VERTEX] = {
                    scope: {MEMORY_SCOPE_EDGE: {MEMORY_VERTEX: ids}}
                    for scope, ids in members.items()
                }
            if link_edges:
                edges[MEMORY_VERTEX] = link_edges
            if edges:
                data["edges"] = edges

            reply = await self._client.upsert("upsert", data, vertex_must_exist=True)
            accepted = int(reply.get("accepted_vertices", 0))
            expected = len(by_id) + len(members)
            if accepted != expected:
                raise TigerGraphIndexError(
                    f"TigerGraph accepted {accepted} of {expected} vertices ({len(by_id)} "
                    f"{MEMORY_VERTEX}, {len(members)} {MEMORY_SCOPE_VERTEX})"
                )
            # Without its MemoryOfScope edge a vertex is invisible to its scope's queries.
            if int(reply.get("accepted_edges", 0)) < len(by_id):
                raise TigerGraphIndexError(
                    f"TigerGraph accepted {reply.get('accepted_edges', 0)} edges for "
                    f"{len(by_id)} {MEMORY_SCOPE_EDGE} edges (and {len(chunk_links)} links)"
                )
            if by_id:
                self.upserts_pending_index += len(by_id)
                if self._pending_since is None:
                    self._pending_since = time.monotonic()

    async def neighbours(
        self, scope_hash: str, vectors: Sequence[Sequence[float]], k: int
    ) -> list[list[VectorHit]]:
        """GSQL's vectorSearch takes one query vector, so this is one installed-query call
        per vector (at most a few in flight), each restricted to the scope's live vertices."""
        gate = asyncio.Semaphore(_NEIGHBOUR_SEARCHES)

        async def one(vector: Sequence[float]) -> list[VectorHit]:
            async with gate:
                return await self.search(scope_hash, vector, k, AsOf())

        return list(await asyncio.gather(*(one(v) for v in vectors)))

    async def vector_status(self) -> bool:
        """Whether every upserted vector is searchable. TigerGraph indexes vectors with HNSW
        and "updates may not be immediately visible until the index is rebuilt"; the rebuild
        is reported by GET /restpp/vector/status/{graph}/{vertex}/{attribute}, whose results
        list "NeedRebuildServers" (ecosys tutorials/VectorSearch.md, "Vector Update",
        "Delayed Update Visibility"; pyTigerGraph getVectorStatus, pytgasync/
        pyTigerGraphVertex.py:135-161, true when that list is empty)."""

        async def status() -> bool:
            return bool(
                await self._client.conn.getVectorStatus(MEMORY_VERTEX, MEMORY_VECTOR_ATTRIBUTE)
            )

        ready = await self._client.call("vector status", status)
        if ready:
            if self._pending_since is not None:
                log.debug(
                    "TigerGraph vector index caught up after %.2fs",
                    time.monotonic() - self._pending_since,
                )
            self._pending_since = None
            self.upserts_pending_index = 0
        return ready

    @property
    def index_lag_s(self) -> float:
        """Seconds since the oldest upsert the vector index has not yet reported rebuilt."""
        return 0.0 if self._pending_since is None else time.monotonic() - self._pending_since

    async def backlog(self) -> tuple[int, float]:
        """(vectors upserted but not yet searchable, index_lag_s), after asking TigerGraph once
        (vector_status clears the count when the index has been rebuilt): the metrics' view."""
        await self.vector_status()
        return self.upserts_pending_index, self.index_lag_s

    async def wait_searchable(self, timeout_s: float, poll_s: float = 0.2) -> bool:
        """Polls vector_status until the index is rebuilt or timeout_s passes; False on
        timeout (logged), so a caller that needs read-your-writes can wait for it."""
        deadline = time.monotonic() + timeout_s
        while True:
            if await self.vector_status():
                return True
            if time.monotonic() >= deadline:
                log.warning(
                    "TigerGraph vector index still rebuilding after %.1fs; %d upserted "
                    "vectors may not be searchable yet",
                    timeout_s,
                    self.upserts_pending_index,
                )
                return False
            await asyncio.sleep(poll_s)

    async def delete(self, version_ids: Sequence[str]) -> None:
        for start in range(0, len(version_ids), self._batch):
            ids = list(dict.fromkeys(version_ids[start : start + self._batch]))
            await self._client.query(names.Q_DELETE_IDS, {"ids": ids})

    async def purge_scope(self, scope_hash: str) -> None:
        await self._client.query(names.Q_PURGE_SCOPE, {"scope": scope_hash})

    async def search(
        self, scope_hash: str, vector: Sequence[float], k: int, as_of: AsOf
    ) -> list[VectorHit]:
        if k <= 0:
            return []
        now = _now_micros()
        res = await self._client.query(
            names.Q_SEARCH,
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
            for v in printed(res, "r")
        ]
        hits.sort(key=lambda h: (-h.cosine, h.version_id))
        return hits[:k]

    async def count(self, scope_hash: str) -> int:
        res = await self._client.query(names.Q_COUNT_SCOPE, {"scope": scope_hash})
        return int(printed(res, "n"))

    async def vectors(self, scope_hash: str, version_ids: Sequence[str]) -> dict[str, list[float]]:
        out: dict[str, list[float]] = {}
        missing = 0
        for start in range(0, len(version_ids), self._batch):
            ids = list(dict.fromkeys(version_ids[start : start + self._batch]))
            res = await self._client.query(names.Q_VECTORS, {"ids": ids})
            for v in printed(res, "s"):
                attrs = v.get("attributes")
                if not isinstance(attrs, dict) or attrs.get("scope_hash") != scope_hash:
                    continue  # another scope's
                vec = _printed_vector(v)
                if vec is not None:
                    out[str(v["v_id"])] = [float(x) for x in vec]
                else:
                    missing += 1
        if missing:
            # A vertex came back without its vector: the reply's shape is not what this
            # adapter reads. Say so rather than let callers quietly re-embed.
            self.vectors_missing += missing
            log.warning(
                "TigerGraph printed %d %s vertices without their %r vector; reply shape changed?",
                missing,
                MEMORY_VERTEX,
                MEMORY_VECTOR_ATTRIBUTE,
            )
        return out
