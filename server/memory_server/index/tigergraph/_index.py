"""TigerGraphIndex, the VectorIndex adapter: records become `MemoryEmbedding` upserts, searches
and deletions become calls of the installed `Memory_*` queries, batch by batch."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from memory_client import schema_names as names
from memory_client.schema_names import MEMORY_VECTOR_ATTRIBUTE, MEMORY_VERTEX
from memory_server.index.tigergraph._client import (
    Client,
    ConnArgs,
    TigerGraphIndexError,
    printed,
)
from memory_server.index.tigergraph._schema import install_schema
from memory_server.memory.ports import AsOf, VectorHit, VectorRecord

# 9999-12-31T23:59:59Z in epoch microseconds: the "still open" end of an interval.
OPEN_END = 253_402_300_799_000_000
DEFAULT_BATCH = 256


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

    async def vectors(self, version_ids: Sequence[str]) -> dict[str, list[float]]:
        out: dict[str, list[float]] = {}
        for start in range(0, len(version_ids), self._batch):
            ids = list(dict.fromkeys(version_ids[start : start + self._batch]))
            res = await self._client.query(names.Q_VECTORS, {"ids": ids})
            for v in printed(res, "s"):
                vec = v.get("attributes", {}).get(MEMORY_VECTOR_ATTRIBUTE)
                if vec is not None:
                    out[str(v["v_id"])] = [float(x) for x in vec]
        return out
