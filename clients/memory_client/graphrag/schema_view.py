"""A pyTigerGraph connection that does not show the memory index.

GraphRAG's agent lists the graph's schema to its LLM through the connection it is given:
`getVertexTypes()` and `getEdgeTypes()` (graphrag/app/agent/agent_router.py:45-46,
tools/map_question_to_schema.py:101-102, tools/generate_gsql.py:60-61,
tools/generate_cypher.py:60-61, tools/validation_utils.py:29,52 at tigergraph/graphrag
cc4eed1). `hide_memory(conn)` wraps that connection once where GraphRAG makes it, so every one
of those reads leaves out the memory service's vertex and edge types, the `getSchema()` dict
too, and the memory queries among `getEndpoints()`; every other call goes to the connection
unchanged.
"""

from __future__ import annotations

from typing import Any

from memory_client.schema_names import (
    hide_memory_edge_types,
    hide_memory_queries,
    hide_memory_schema,
    hide_memory_vertex_types,
)

__all__ = ["MemoryHidingConnection", "hide_memory"]


class MemoryHidingConnection:
    """Delegates to a pyTigerGraph connection (or GraphRAG's `TigerGraphConnectionProxy`),
    with the schema listings filtered."""

    def __init__(self, conn: Any) -> None:
        object.__setattr__(self, "_conn", conn)

    def __getattr__(self, name: str) -> Any:
        return getattr(object.__getattribute__(self, "_conn"), name)

    def __setattr__(self, name: str, value: Any) -> None:
        # GraphRAG sets attributes on its connections (graphname, tokens): they go through.
        setattr(object.__getattribute__(self, "_conn"), name, value)

    @property
    def wrapped(self) -> Any:
        return object.__getattribute__(self, "_conn")

    def getVertexTypes(self, *args: Any, **kwargs: Any) -> list[str]:  # noqa: N802
        return hide_memory_vertex_types(self.wrapped.getVertexTypes(*args, **kwargs))

    def getEdgeTypes(self, *args: Any, **kwargs: Any) -> list[str]:  # noqa: N802
        conn = self.wrapped

        # An edge type someone else added at a memory vertex goes too. pyTigerGraph answers
        # these from the schema it has already fetched for getEdgeTypes (no request each).
        def endpoints(edge: str) -> tuple[Any, Any]:
            return conn.getEdgeSourceVertexType(edge), conn.getEdgeTargetVertexType(edge)

        return hide_memory_edge_types(conn.getEdgeTypes(*args, **kwargs), endpoints)

    def getSchema(self, *args: Any, **kwargs: Any) -> Any:  # noqa: N802
        schema = self.wrapped.getSchema(*args, **kwargs)
        return hide_memory_schema(schema) if isinstance(schema, dict) else schema

    def getEndpoints(self, *args: Any, **kwargs: Any) -> Any:  # noqa: N802
        endpoints = self.wrapped.getEndpoints(*args, **kwargs)
        if isinstance(endpoints, dict):
            return {k: v for k, v in endpoints.items() if not _is_memory_endpoint(k)}
        return endpoints


def _is_memory_endpoint(endpoint: object) -> bool:
    return isinstance(endpoint, str) and not hide_memory_queries([endpoint])


def hide_memory(conn: Any) -> Any:
    """`conn` seen without the memory index (idempotent)."""
    return conn if isinstance(conn, MemoryHidingConnection) else MemoryHidingConnection(conn)
