"""The TigerGraph index under test, pointed at the loopback stand-in (tests/tg_server.py; the
`tg` fixture is in conftest): connection arguments and an index with a test's overrides; and
the index of the release before issue 27 as data — the GSQL it installed, verbatim, and its
vertices with the vector attribute `embedding`, sent as it sent them (REST++ upserts) — for the
migration tests and for measuring what its queries touched."""

from __future__ import annotations

import hashlib
import json
import urllib.request
from collections.abc import Sequence
from typing import Any

from memory_client.schema_names import (
    Q_COUNT_SCOPE,
    Q_DELETE_IDS,
    Q_PURGE_SCOPE,
    Q_SEARCH,
    Q_VECTORS,
)
from memory_server.index.tigergraph import ConnArgs, TigerGraphIndex
from memory_server.memory.ports import VectorRecord

from tg_server import TGServer

DIM = 4


def args(tg: TGServer, **kw: object) -> ConnArgs:
    base: dict[str, object] = {"host": tg.url, "graph": tg.state.graph, "token": "good-token"}
    base.update(kw)
    return ConnArgs(**base)  # type: ignore[arg-type]


def index(tg: TGServer, **kw: object) -> TigerGraphIndex:
    opts: dict[str, object] = {"token": "good-token", "dimension": DIM, "timeout_s": 5}
    opts.update(kw)
    return TigerGraphIndex(tg.url, tg.state.graph, **opts)  # type: ignore[arg-type]


def server_settings(tg: TGServer) -> dict[str, object]:
    """Settings overrides for a memory server whose vector index is the stand-in."""
    return {
        "vector_index": "tigergraph",
        "tigergraph_host": tg.url,
        "tigergraph_graph": tg.state.graph,
        "tigergraph_token": "good-token",
    }


# -- the release before issue 27 ------------------------------------------------------------
OLD_GSQL_ADD_VERTEX = """USE GRAPH {graph}
CREATE SCHEMA_CHANGE JOB Memory_add_vertex FOR GRAPH {graph} {{
  ADD VERTEX MemoryEmbedding (PRIMARY_ID version_id STRING, scope_hash STRING, valid_from INT,
    valid_to INT, recorded_at INT, superseded_at INT) WITH primary_id_as_attribute="true";
}}
RUN SCHEMA_CHANGE JOB Memory_add_vertex
DROP JOB Memory_add_vertex
"""
OLD_GSQL_ADD_VECTOR = """USE GRAPH {graph}
CREATE SCHEMA_CHANGE JOB Memory_add_vector FOR GRAPH {graph} {{
  ALTER VERTEX MemoryEmbedding
    ADD VECTOR ATTRIBUTE embedding(DIMENSION={dimension}, METRIC="COSINE");
}}
RUN SCHEMA_CHANGE JOB Memory_add_vector
DROP JOB Memory_add_vector
"""
OLD_GSQL_ADD_LINK = """USE GRAPH {graph}
CREATE SCHEMA_CHANGE JOB Memory_add_link FOR GRAPH {graph} {{
  ADD UNDIRECTED EDGE MemoryLink (FROM MemoryEmbedding, TO MemoryEmbedding, score FLOAT,
    recorded_at INT, superseded_at INT);
}}
RUN SCHEMA_CHANGE JOB Memory_add_link
DROP JOB Memory_add_link
"""
# Each seeded with every memory vertex of every scope: `{MemoryEmbedding.*}`.
OLD_QUERIES: dict[str, str] = {
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
  // The same predicates again over the hits: whatever vectorSearch does with an empty
  // candidate set (TigerGraph's docs do not say), no vertex of another scope is returned.
  r = SELECT v FROM r:v
      WHERE v.scope_hash == scope
        AND v.recorded_at <= tx_time AND tx_time < v.superseded_at
        AND v.valid_from <= valid_time AND valid_time < v.valid_to
      POST-ACCUM v.@distance = @@d.get(v);
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
  PRINT "{schema}" AS schema;
}}""",
    Q_VECTORS: """CREATE OR REPLACE QUERY Memory_vectors(SET<STRING> ids) FOR GRAPH {graph} {{
  s = to_vertex_set(ids, "MemoryEmbedding");
  PRINT s WITH VECTOR;
}}""",
}
OLD_SCHEMA_HASH = hashlib.sha256(
    "\n".join(OLD_QUERIES[q] for q in sorted(OLD_QUERIES)).encode()
).hexdigest()[:16]
OPEN_END = 253_402_300_799_000_000


def _post(tg: TGServer, path: str, body: bytes, content_type: str) -> bytes:
    request = urllib.request.Request(
        tg.url + path,
        data=body,
        headers={"Authorization": "Bearer good-token", "Content-Type": content_type},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as reply:
        data: bytes = reply.read()
        return data


def gsql(tg: TGServer, text: str) -> str:
    """POST /gsql/v1/statements, as pyTigerGraph's gsql() sends it."""
    return _post(tg, "/gsql/v1/statements", text.encode(), "text/plain").decode()


def upsert(tg: TGServer, data: dict[str, Any]) -> dict[str, Any]:
    reply = json.loads(
        _post(tg, f"/restpp/graph/{tg.state.graph}", json.dumps(data).encode(), "application/json")
    )
    assert not reply.get("error"), reply
    result: dict[str, Any] = reply["results"][0]
    return result


def install_old_queries(tg: TGServer) -> None:
    graph = tg.state.graph
    texts = [q.format(graph=graph, schema=OLD_SCHEMA_HASH) for q in OLD_QUERIES.values()]
    out = gsql(tg, f"USE GRAPH {graph}\n" + "\n".join(texts))
    out += gsql(tg, f"USE GRAPH {graph}\nINSTALL QUERY {', '.join(OLD_QUERIES)}\n")
    assert "Query installation finished." in out, out


def install_legacy(tg: TGServer, dimension: int) -> None:
    """The schema and queries the release before issue 27 installed."""
    graph = tg.state.graph
    for text in (OLD_GSQL_ADD_VERTEX, OLD_GSQL_ADD_VECTOR, OLD_GSQL_ADD_LINK):
        out = gsql(tg, text.format(graph=graph, dimension=dimension))
        assert "Local schema change succeeded." in out, out
    install_old_queries(tg)


def _micros(t: Any, default: int) -> int:
    return default if t is None else int(t.timestamp() * 1_000_000)


def upsert_legacy(tg: TGServer, records: Sequence[VectorRecord], batch: int = 1000) -> None:
    """The vertices as that release upserted them: vector under `embedding`, no scope vertex."""
    for start in range(0, len(records), batch):
        vertices = {
            r.version_id: {
                "scope_hash": {"value": r.scope_hash},
                "valid_from": {"value": _micros(r.valid_from, 0)},
                "valid_to": {"value": _micros(r.valid_to, OPEN_END)},
                "recorded_at": {"value": _micros(r.recorded_at, 0)},
                "superseded_at": {"value": _micros(r.superseded_at, OPEN_END)},
                "embedding": {"value": [float(x) for x in r.vector]},
            }
            for r in records[start : start + batch]
        }
        reply = upsert(tg, {"vertices": {"MemoryEmbedding": vertices}})
        assert reply["accepted_vertices"] == len(vertices), reply
