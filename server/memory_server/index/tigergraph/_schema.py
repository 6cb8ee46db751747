"""Installing what the memory index needs in the user's graph: the `MemoryEmbedding` vertex
type, its COSINE vector attribute and the `Memory_*` queries, each only where missing.

All GSQL text is fixed here; the only substituted values are the configured graph name
(validated as an identifier) and the dimension (an int).
"""

from __future__ import annotations

import hashlib
import logging
import re
from typing import Any

from memory_client.schema_names import (
    MEMORY_LINK_EDGE,
    MEMORY_QUERIES,
    MEMORY_VECTOR_ATTRIBUTE,
    MEMORY_VERTEX,
    Q_COUNT_SCOPE,
    Q_DELETE_IDS,
    Q_PURGE_SCOPE,
    Q_SEARCH,
    Q_VECTORS,
)
from memory_server.index.tigergraph._client import (
    Client,
    ConnArgs,
    TigerGraphIndexError,
    check_graph,
)

MIN_VERSION = (4, 2)
log = logging.getLogger(__name__)

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

# Semantic links (memory_server.outbox.links) as an undirected edge between memory vertices,
# with the link's transaction interval in epoch microseconds like the vertex's. The syntax is
# TigerGraph's schema change job statement `ADD UNDIRECTED EDGE name (FROM v, TO v, attrs)`
# (docs.tigergraph.com, GSQL Language Reference, "Modifying a Graph Schema": ADD VERTEX | ADD
# DIRECTED EDGE | ADD UNDIRECTED EDGE inside CREATE SCHEMA_CHANGE JOB).
GSQL_ADD_LINK = """USE GRAPH {graph}
CREATE SCHEMA_CHANGE JOB Memory_add_link FOR GRAPH {graph} {{
  ADD UNDIRECTED EDGE MemoryLink (FROM MemoryEmbedding, TO MemoryEmbedding, score FLOAT,
    recorded_at INT, superseded_at INT);
}}
RUN SCHEMA_CHANGE JOB Memory_add_link
DROP JOB Memory_add_link
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
GSQL_INSTALL = "USE GRAPH {graph}\nINSTALL QUERY {names}\n"

# The version of the query texts: Memory_count_scope prints it, and install_schema compares
# it with what the installed query prints, so a changed query text is reinstalled even where
# a query of that name is installed already. An empty scope hash matches no vertex.
SCHEMA_HASH = hashlib.sha256(
    "\n".join(GSQL_QUERIES[q] for q in sorted(GSQL_QUERIES)).encode()
).hexdigest()[:16]


def query_text(name: str, graph: str) -> str:
    return GSQL_QUERIES[name].format(graph=graph, schema=SCHEMA_HASH)


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


def _parse_version(text: str) -> tuple[int, ...]:
    parts = re.findall(r"\d+", text)
    return tuple(int(p) for p in parts[:3])


def _check_gsql(output: Any, what: str) -> str:
    text = str(output or "")
    if any(marker in text for marker in _GSQL_FAILURES):
        raise TigerGraphIndexError(f"TigerGraph {what} failed: {text.strip()[:2000]}")
    return text


def _vector_attribute(vertex: dict[str, Any]) -> dict[str, Any] | None:
    """The memory vector attribute as the schema describes it (TigerGraph 4.x has used both
    keys); None when the vertex type has none."""
    for key in ("EmbeddingAttributes", "VectorAttributes"):
        for attr in vertex.get(key) or []:
            if isinstance(attr, dict) and attr.get("Name") == MEMORY_VECTOR_ATTRIBUTE:
                return attr
    return None


async def _installed_schema(client: Client) -> str | None:
    """The query version the installed Memory_count_scope prints; None before versions."""
    res = await client.query(Q_COUNT_SCOPE, {"scope": ""})
    for item in res:
        if isinstance(item, dict) and "schema" in item:
            return str(item["schema"])
    return None


async def install_schema(
    conn_args: ConnArgs, dimension: int, install_timeout_s: float | None = None
) -> bool:
    """Creates the memory vertex type, its vector attribute, the link edge type and the
    Memory_* queries where
    missing or changed. Idempotent; returns whether anything changed. Refuses TigerGraph < 4.2.

    INSTALL QUERY compiles the queries on the server; TigerGraph publishes no bound on how
    long that takes, so that one statement gets install_timeout_s (default: the connection's
    timeout) and a timeout is Unavailable, for the caller to retry."""
    if not isinstance(dimension, int) or not 1 <= dimension <= 4096:
        raise ValueError(f"vector dimension must be 1..4096, not {dimension!r}")
    graph = check_graph(conn_args.graph)
    client = Client(conn_args)
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
        vector = None if vertex is None else _vector_attribute(vertex)
        if vector is None:
            text = GSQL_ADD_VECTOR.format(graph=graph, dimension=dimension)
            _check_gsql(await client.call("schema change", lambda: conn.gsql(text)), "add vector")
            changed = True
        elif vector.get("Dimension") is not None:
            stored = int(vector["Dimension"])
            if stored != dimension:
                raise TigerGraphIndexError(
                    f"{MEMORY_VERTEX}.{MEMORY_VECTOR_ATTRIBUTE} holds {stored}-dimensional "
                    f"vectors, the embedder makes {dimension}; re-embed"
                )
        if not any(
            isinstance(e, dict) and e.get("Name") == MEMORY_LINK_EDGE
            for e in (schema or {}).get("EdgeTypes", [])
        ):
            text = GSQL_ADD_LINK.format(graph=graph)
            _check_gsql(await client.call("schema change", lambda: conn.gsql(text)), "add link")
            changed = True
        endpoints = await client.call("endpoints", lambda: conn.getEndpoints(dynamic=True))
        prefix = f"/query/{graph}/"
        installed = {
            ep.split(prefix, 1)[1]
            for ep in (endpoints or {})
            if isinstance(ep, str) and prefix in ep
        }
        missing = [q for q in MEMORY_QUERIES if q not in installed]
        if not missing:
            version_seen = await _installed_schema(client)
            if version_seen != SCHEMA_HASH:
                log.info(
                    "installed Memory_* queries are version %s, this server's are %s: "
                    "reinstalling them",
                    version_seen,
                    SCHEMA_HASH,
                )
                missing = list(MEMORY_QUERIES)
        if missing:
            create = f"USE GRAPH {graph}\n" + "\n".join(query_text(q, graph) for q in missing)
            _check_gsql(await client.call("create queries", lambda: conn.gsql(create)), "create")
            install = GSQL_INSTALL.format(graph=graph, names=", ".join(missing))
            installed_out = await client.call(
                "install queries", lambda: conn.gsql(install), install_timeout_s
            )
            _check_gsql(installed_out, "install")
            changed = True
        return changed
    finally:
        await client.aclose()
