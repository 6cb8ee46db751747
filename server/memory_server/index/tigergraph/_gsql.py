"""The GSQL the memory index installs in the user's graph: schema change job statements and the
`Memory_*` queries.

All text is fixed here; the only substituted values are the configured graph name (validated
as an identifier), the dimension (an int) and the query version (a hex digest). Every value
that comes from users travels as a query parameter.

Syntax, and where it is documented:
- A schema change job `CREATE SCHEMA_CHANGE JOB j FOR GRAPH g { ... }`, then `RUN SCHEMA_CHANGE
  JOB j` and `DROP JOB j` (docs.tigergraph.com, GSQL Language Reference, "Modifying a Graph
  Schema": ADD VERTEX | ADD DIRECTED EDGE | ADD UNDIRECTED EDGE | ALTER VERTEX). New vertex
  types and the edges between them go in one job, as GraphRAG's add_supportai_schema does
  (common/gsql/supportai/SupportAI_Schema.gsql); a vector attribute in a job of its own after
  them, as GraphRAG's add_supportai_vector.
- `ALTER VERTEX v ADD VECTOR ATTRIBUTE a(DIMENSION=n, METRIC="COSINE")` and `ALTER VERTEX v DROP
  VECTOR ATTRIBUTE a` inside such a job (docs.tigergraph.com/gsql-ref/4.2/vector, "Creating a
  Vector Schema": "The ADD VECTOR ATTRIBUTE clause adds a vector, and DROP VECTOR ATTRIBUTE
  removed the attribute"; tigergraph/ecosys tutorials/VectorSearch.md, "Remove a Vector From
  Local Vertex", runs exactly `ALTER VERTEX Account DROP VECTOR ATTRIBUTE emb1;` in a local
  schema change job).
- A one-vertex seed from a STRING: `SetAccum<STRING> @@seed; @@seed += id; s =
  to_vertex_set(@@seed, "Type");`, which is empty when no such vertex exists (ecosys
  tools/ldbc_benchmark/tigergraph/queries/interactive_short/is_4.gsql probes two vertex
  types this way and tests `.size() > 0`). A `VERTEX<MemoryScope>` parameter would instead
  make every call for a scope never written an error.
- One hop over a directed edge in the default syntax (V2): `sc:s -(MemoryOfScope>:e)-
  MemoryEmbedding:m` (docs.tigergraph.com, "Query Language Syntax Versions": "If an edge type
  is directed, the edge notation must have arrowheads inside the parentheses").
- `vectorSearch({V.attr}, qv, k, {candidate_set: c, distance_map: @@d})` over a pre-filtered
  vertex set (ecosys tutorials/VectorSearch.md, "Filtered Vector Search"); `PRINT s WITH
  VECTOR` for the vectors themselves.
- `ORDER BY` and `LIMIT` in a SELECT block (docs.tigergraph.com, "SELECT Statement":
  orderClause, limitClause) for the migration's pages.
"""

from __future__ import annotations

import hashlib

from memory_client.schema_names import (
    Q_COUNT_SCOPE,
    Q_DELETE_IDS,
    Q_PURGE_SCOPE,
    Q_SCAN_PAGE,
    Q_SEARCH,
    Q_VECTORS,
)

# `{job}`, `{graph}` and `{body}` (statements of this module) are the substitutions.
GSQL_JOB = """USE GRAPH {graph}
CREATE SCHEMA_CHANGE JOB {job} FOR GRAPH {graph} {{
{body}}}
RUN SCHEMA_CHANGE JOB {job}
DROP JOB {job}
"""
GSQL_DROP_JOB = "USE GRAPH {graph}\nDROP JOB {job}\n"
GSQL_LS = "USE GRAPH {graph}\nls\n"
GSQL_INSTALL = "USE GRAPH {graph}\nINSTALL QUERY {names}\n"

ADD_MEMORY_VERTEX = """  ADD VERTEX MemoryEmbedding (PRIMARY_ID version_id STRING,
    scope_hash STRING, valid_from INT, valid_to INT, recorded_at INT, superseded_at INT)
    WITH primary_id_as_attribute="true";
"""
ADD_SCOPE_VERTEX = """  ADD VERTEX MemoryScope (PRIMARY_ID scope_hash STRING)
    WITH primary_id_as_attribute="true";
"""
# Directed, with no reverse edge: queries only ever go from a scope to its memory vertices,
# and deleting a memory vertex deletes its edges.
ADD_SCOPE_EDGE = "  ADD DIRECTED EDGE MemoryOfScope (FROM MemoryScope, TO MemoryEmbedding);\n"
# Semantic links (memory_server.outbox.links), with the link's transaction interval in epoch
# microseconds like the vertex's.
ADD_LINK_EDGE = """  ADD UNDIRECTED EDGE MemoryLink (FROM MemoryEmbedding, TO MemoryEmbedding,
    score FLOAT, recorded_at INT, superseded_at INT);
"""
# `{dimension}` is substituted.
ADD_VECTOR = """  ALTER VERTEX MemoryEmbedding
    ADD VECTOR ATTRIBUTE memory_vector(DIMENSION={dimension}, METRIC="COSINE");
"""
DROP_LEGACY_VECTOR = "  ALTER VERTEX MemoryEmbedding DROP VECTOR ATTRIBUTE embedding;\n"

# The scope's own vertex: an empty set for a scope never written (or just purged).
_SCOPE_SEED = """  SetAccum<STRING> @@seed;
  @@seed += scope;
  sc = to_vertex_set(@@seed, "MemoryScope");"""

# The as-of belief predicate, the same as pgvector's:
#   recorded_at <= tx_time < superseded_at  and  valid_from <= valid_time < valid_to.
GSQL_QUERIES: dict[str, str] = {
    Q_SEARCH: """CREATE OR REPLACE QUERY Memory_search(STRING scope, LIST<FLOAT> qv, INT k,
    INT valid_time, INT tx_time) FOR GRAPH {graph} {{
  MapAccum<VERTEX, FLOAT> @@d;
  SumAccum<FLOAT> @distance;
"""
    + _SCOPE_SEED
    + """
  // Only this scope's memory vertices, filtered by the as-of point before anything is ranked.
  c = SELECT m FROM sc:s -(MemoryOfScope>:e)- MemoryEmbedding:m
      WHERE m.scope_hash == scope
        AND m.recorded_at <= tx_time AND tx_time < m.superseded_at
        AND m.valid_from <= valid_time AND valid_time < m.valid_to;
  r = vectorSearch({{MemoryEmbedding.memory_vector}}, qv, k,
                   {{candidate_set: c, distance_map: @@d}});
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
"""
    + _SCOPE_SEED
    + """
  s = SELECT m FROM sc:x -(MemoryOfScope>:e)- MemoryEmbedding:m WHERE m.scope_hash == scope;
  DELETE v FROM s:v;
  DELETE v FROM sc:v;
  PRINT s.size() AS deleted;
}}""",
    Q_COUNT_SCOPE: """CREATE OR REPLACE QUERY Memory_count_scope(STRING scope) FOR GRAPH {graph} {{
"""
    + _SCOPE_SEED
    + """
  s = SELECT m FROM sc:x -(MemoryOfScope>:e)- MemoryEmbedding:m WHERE m.scope_hash == scope;
  PRINT s.size() AS n;
  PRINT "{schema}" AS schema;
}}""",
    Q_VECTORS: """CREATE OR REPLACE QUERY Memory_vectors(SET<STRING> ids) FOR GRAPH {graph} {{
  s = to_vertex_set(ids, "MemoryEmbedding");
  PRINT s WITH VECTOR;
}}""",
    # Every memory vertex, `n` at a time in version id order after `after`, with all its
    # vector attributes: what the migration copies from. It names no vector attribute, so
    # dropping the old one leaves it installed.
    Q_SCAN_PAGE: """CREATE OR REPLACE QUERY Memory_scan_page(STRING after, INT n)
    FOR GRAPH {graph} {{
  s = {{MemoryEmbedding.*}};
  s = SELECT v FROM s:v WHERE v.version_id > after ORDER BY v.version_id ASC LIMIT n;
  PRINT s WITH VECTOR;
}}""",
}

# The version of the query texts: Memory_count_scope prints it, and install_schema compares
# it with what the installed query prints, so a changed query text is reinstalled even where
# a query of that name is installed already. An empty scope hash matches no vertex.
SCHEMA_HASH = hashlib.sha256(
    "\n".join(GSQL_QUERIES[q] for q in sorted(GSQL_QUERIES)).encode()
).hexdigest()[:16]


def query_text(name: str, graph: str) -> str:
    return GSQL_QUERIES[name].format(graph=graph, schema=SCHEMA_HASH)
