"""The TigerGraph vector index: the memory vectors live in the user's TigerGraph (>= 4.2).

One vertex type, `MemoryEmbedding`, keyed by fact version id, carries the scope hash, the
bitemporal bounds (epoch microseconds; an open bound is `OPEN_END`) and a COSINE vector
attribute `memory_vector` (not `embedding`: GraphRAG reads any `- embedding(Dimension=` in
`ls` as its own vector schema and would skip installing it). One `MemoryScope` vertex per
scope (primary id: the scope hash) has a `MemoryOfScope` edge to each of the scope's memory
vertices; the outbox upserts both with the vertex, in the same request. Search runs the
installed query `Memory_search`, which starts at the scope's vertex, pre-filters its memory
vertices by the as-of predicate and only then runs `vectorSearch` over them — the same
semantics as the embedded pgvector index, touching one scope's vertices, not every scope's.
Count and purge start there too; purge deletes the scope vertex with its memory vertices.
A graph of an earlier release (vector attribute `embedding`, no scope vertices) is migrated by
install_schema without embedding anything again (_migrate). All GSQL text is fixed module
constants (_gsql); every value that comes from users travels as a query parameter.

Wire calls (pyTigerGraph 2.0.5, AsyncTigerGraphConnection):
  upsert       POST /restpp/graph/{graph}?vertex_must_exist=true (one per batch of
               `batch_size`: memory vertices, their scope vertices and edges, links)
  delete/purge/count/search/vectors
               POST /restpp/query/{graph}/Memory_*        (one per call; JSON parameters)
  install      GET /restpp/version, GET /gsql/v1/schema/graphs/{graph},
               GET /restpp/endpoints/{graph}?dynamic=true, POST /gsql/v1/statements (schema
               change jobs, `ls` before them, CREATE/INSTALL QUERY)
  migrate      POST /restpp/query/{graph}/Memory_scan_page, POST /restpp/graph/{graph} with
               update_vertex_only=true (vectors) and vertex_must_exist=true (scopes)
  vector status GET /restpp/vector/status/{graph}/MemoryEmbedding/memory_vector (vector_status,
               wait_searchable: new vectors are searchable only after the HNSW rebuild)
  token        POST /gsql/v1/tokens (gsql_secret, or automatic on 401 with username/password;
               a configured apiToken refused with REST-10016/401 is replaced from the secret
               or username/password when configured, else a clear permanent error)
  errors       Unavailable for HTTP 5xx/408/429 (also with a JSON body), REST-3002 and
               connection failures; everything else is TigerGraphIndexError
  versions     Memory_count_scope prints SCHEMA_HASH; a different one is reinstalled

  _client   ConnArgs, the connection, its error mapping and the REST++ upsert
  _gsql     the GSQL texts: schema change statements and the Memory_* queries
  _schema   install_schema: what is missing, in order
  _migrate  the copy from the old vector attribute and the scope vertices for old vertices
  _index    TigerGraphIndex, the VectorIndex adapter
  _install  the background install after an outage at start
  __main__  the install-schema command
"""

from memory_server.index.tigergraph._client import ConnArgs, TigerGraphIndexError
from memory_server.index.tigergraph._index import OPEN_END, TigerGraphIndex
from memory_server.index.tigergraph._install import install_until_done
from memory_server.index.tigergraph._schema import MIN_VERSION, install_schema

__all__ = [
    "install_until_done",
    "MIN_VERSION",
    "OPEN_END",
    "ConnArgs",
    "TigerGraphIndex",
    "TigerGraphIndexError",
    "install_schema",
]
