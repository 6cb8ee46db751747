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
  vector status GET /restpp/vector/status/{graph}/MemoryEmbedding/embedding (vector_status,
               wait_searchable: new vectors are searchable only after the HNSW rebuild)
  token        POST /gsql/v1/tokens (gsql_secret, or automatic on 401 with username/password;
               a configured apiToken refused with REST-10016/401 is replaced from the secret
               or username/password when configured, else a clear permanent error)
  errors       Unavailable for HTTP 5xx/408/429 (also with a JSON body), REST-3002 and
               connection failures; everything else is TigerGraphIndexError
  versions     Memory_count_scope prints SCHEMA_HASH; a different one is reinstalled

  _client   ConnArgs, the connection and its error mapping
  _schema   the GSQL and install_schema
  _index    TigerGraphIndex, the VectorIndex adapter
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
