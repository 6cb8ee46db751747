"""The one definition of the TigerGraph names the memory service owns.

The memory vector index lives inside a user's GraphRAG graph, so anything that lists that
graph's schema or installed queries to a person (or to an LLM) must hide these names, and
nothing else:

* `hide_memory_vertex_types` and `hide_memory_edge_types` for the name lists of
  pyTigerGraph's `getVertexTypes()` and `getEdgeTypes()`, which GraphRAG's agent reads;
* `hide_memory_vertices_info` and `hide_memory_edges_info` for the per-type dicts GraphRAG's
  schema mapping builds from them (`{"vertex", "attributes"}`, `{"edge", "source", "target"}`);
* `hide_memory_schema` for a `getSchema()` dict, `hide_memory_queries` for query listings.

The names: vertex types `MemoryEmbedding` (one per fact version, vector attribute
`memory_vector`) and `MemoryScope` (one per scope), edge types `MemoryLink` and
`MemoryOfScope`, the `Memory_*` queries and schema change jobs. None of them equals a name
GraphRAG's own GSQL uses (tests/test_tigergraph_names.py holds GraphRAG's names as data).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from typing import Any

MEMORY_VERTEX = "MemoryEmbedding"
# Not `embedding`: GraphRAG (supportai.py) takes any `- embedding(Dimension=` in the graph's
# `ls` for its own vector schema and then skips installing it.
MEMORY_VECTOR_ATTRIBUTE = "memory_vector"
# What releases before issue 27 called the vector attribute; install_schema migrates it.
LEGACY_VECTOR_ATTRIBUTE = "embedding"
# One vertex per scope (primary id: the scope hash) with an edge to each of its memory
# vertices, so that a scope's queries start from it instead of scanning every scope's memory.
MEMORY_SCOPE_VERTEX = "MemoryScope"
MEMORY_QUERY_PREFIX = "Memory_"

Q_SEARCH = MEMORY_QUERY_PREFIX + "search"
Q_DELETE_IDS = MEMORY_QUERY_PREFIX + "delete_ids"
Q_PURGE_SCOPE = MEMORY_QUERY_PREFIX + "purge_scope"
Q_COUNT_SCOPE = MEMORY_QUERY_PREFIX + "count_scope"
Q_VECTORS = MEMORY_QUERY_PREFIX + "vectors"
# The one query that reads every memory vertex (a page at a time): the migration's.
Q_SCAN_PAGE = MEMORY_QUERY_PREFIX + "scan_page"

MEMORY_QUERIES: tuple[str, ...] = (
    Q_SEARCH,
    Q_DELETE_IDS,
    Q_PURGE_SCOPE,
    Q_COUNT_SCOPE,
    Q_VECTORS,
    Q_SCAN_PAGE,
)
# Schema change jobs the installer creates (and drops again after running them).
JOB_ADD_TYPES = MEMORY_QUERY_PREFIX + "add_types"
JOB_ADD_VECTOR = MEMORY_QUERY_PREFIX + "add_vector"
JOB_DROP_LEGACY_VECTOR = MEMORY_QUERY_PREFIX + "drop_legacy_vector"
MEMORY_JOBS: tuple[str, ...] = (JOB_ADD_TYPES, JOB_ADD_VECTOR, JOB_DROP_LEGACY_VECTOR)

# Semantic links between memory vertices (an undirected edge MemoryEmbedding - MemoryEmbedding).
MEMORY_LINK_EDGE = "MemoryLink"
# A scope's memory vertices (a directed edge MemoryScope -> MemoryEmbedding).
MEMORY_SCOPE_EDGE = "MemoryOfScope"
MEMORY_VERTICES: tuple[str, ...] = (MEMORY_VERTEX, MEMORY_SCOPE_VERTEX)
# Any other edge type is hidden too when one of its ends is a memory vertex type (see
# `hide_memory_edge_types`).
MEMORY_EDGES: tuple[str, ...] = (MEMORY_LINK_EDGE, MEMORY_SCOPE_EDGE)

_MEMORY_VERTICES = frozenset(MEMORY_VERTICES)
_MEMORY_EDGES = frozenset(MEMORY_EDGES)
_MEMORY_QUERIES = frozenset(MEMORY_QUERIES)


def is_memory_vertex(name: object) -> bool:
    return isinstance(name, str) and name in _MEMORY_VERTICES


def is_memory_edge(name: object) -> bool:
    return isinstance(name, str) and name in _MEMORY_EDGES


def _names_memory(end: object) -> bool:
    """Whether a vertex-type answer names a memory vertex: pyTigerGraph's
    `getEdgeSourceVertexType` gives a name, "*", or a set of names for an edge type with
    several pairs."""
    if isinstance(end, str):
        return is_memory_vertex(end)
    if isinstance(end, Iterable):
        return any(is_memory_vertex(e) for e in end)
    return False


def is_memory_query(name: str) -> bool:
    """True for a memory-owned query name, also in endpoint form ("GET /query/g/Memory_search")."""
    return name.rsplit("/", 1)[-1] in _MEMORY_QUERIES


def _edge_touches_memory(edge: dict[str, Any]) -> bool:
    return is_memory_vertex(edge.get("FromVertexTypeName")) or is_memory_vertex(
        edge.get("ToVertexTypeName")
    )


def _pairs_without_memory(pairs: Iterable[Any]) -> list[Any]:
    return [
        p
        for p in pairs
        if not (
            isinstance(p, dict)
            and (is_memory_vertex(p.get("From")) or is_memory_vertex(p.get("To")))
        )
    ]


def hide_memory_schema(schema_json: dict[str, Any]) -> dict[str, Any]:
    """A copy of a `getSchema()` listing without the memory-owned vertex types (with their
    vector attribute), the memory-owned edge types, and any edge type (or edge pair) that
    touches a memory vertex type. The input is not changed."""
    out = copy.deepcopy(schema_json)
    vertices = out.get("VertexTypes")
    if isinstance(vertices, list):
        out["VertexTypes"] = [
            v for v in vertices if not (isinstance(v, dict) and is_memory_vertex(v.get("Name")))
        ]
    edges = out.get("EdgeTypes")
    if isinstance(edges, list):
        kept = []
        for edge in edges:
            if not isinstance(edge, dict):
                kept.append(edge)
                continue
            if is_memory_edge(edge.get("Name")):
                continue
            pairs = edge.get("EdgePairs")
            if isinstance(pairs, list) and pairs:
                remaining = _pairs_without_memory(pairs)
                if not remaining:
                    continue
                if len(remaining) != len(pairs):
                    edge["EdgePairs"] = remaining
                    first = remaining[0]
                    if isinstance(first, dict) and _edge_touches_memory(edge):
                        edge["FromVertexTypeName"] = first.get("From")
                        edge["ToVertexTypeName"] = first.get("To")
                kept.append(edge)
            elif not _edge_touches_memory(edge):
                kept.append(edge)
        out["EdgeTypes"] = kept
    # Some listings carry per-graph vector/embedding metadata keyed by vertex type.
    for key in ("EmbeddingAttributes", "VectorAttributes"):
        attrs = out.get(key)
        if isinstance(attrs, list):
            out[key] = [
                a
                for a in attrs
                if not (
                    isinstance(a, dict)
                    and (is_memory_vertex(a.get("VertexType")) or is_memory_vertex(a.get("Vertex")))
                )
            ]
    return out


def hide_memory_vertex_types(names: Iterable[str]) -> list[str]:
    """A `getVertexTypes()` list without the memory-owned vertex types (order kept)."""
    return [n for n in names if not is_memory_vertex(n)]


def hide_memory_edge_types(
    names: Iterable[str], endpoints: Callable[[str], tuple[object, object]] | None = None
) -> list[str]:
    """A `getEdgeTypes()` list without the memory-owned edge types (order kept). With
    `endpoints` (an edge type's source and target vertex types, e.g. pyTigerGraph's
    `getEdgeSourceVertexType` and `getEdgeTargetVertexType`), an edge type with a memory vertex
    type at either end goes too."""
    kept = []
    for name in names:
        if is_memory_edge(name):
            continue
        if endpoints is not None and any(_names_memory(end) for end in endpoints(name)):
            continue
        kept.append(name)
    return kept


def hide_memory_vertices_info(infos: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """GraphRAG's `{"vertex": name, "attributes": [...]}` list without memory vertex types."""
    return [i for i in infos if not is_memory_vertex(i.get("vertex"))]


def hide_memory_edges_info(infos: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """GraphRAG's `{"edge", "source", "target"}` list without memory-owned edge types and
    without edge types with a memory vertex type at either end."""
    return [
        i
        for i in infos
        if not (
            is_memory_edge(i.get("edge"))
            or _names_memory(i.get("source"))
            or _names_memory(i.get("target"))
        )
    ]


def hide_memory_queries(names: list[str]) -> list[str]:
    """The installed-query list without the memory-owned queries (order kept)."""
    return [n for n in names if not is_memory_query(n)]
