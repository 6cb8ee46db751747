"""Moving the memory vertices of an earlier release onto today's schema, without embedding
anything again: each vertex's vector is copied from the attribute `embedding` (a name GraphRAG
takes for its own, issue 27) to `memory_vector`, and its scope gets a `MemoryScope` vertex with
a `MemoryOfScope` edge to it.

`Memory_scan_page` reads the vertices `PAGE` at a time in version id order, each with all its
vector attributes (`PRINT s WITH VECTOR`); REST++ upserts write them back:
- the copies with `update_vertex_only=true`, which "will only update existing vertices and not
  insert new vertices" (docs.tigergraph.com, REST API "Upsert data to graph"), so a vertex the
  outbox deletes meanwhile is not brought back;
- the scope vertices and edges with `vertex_must_exist=true`, so an edge to a vertex deleted
  meanwhile is skipped.
A vertex whose `memory_vector` already equals its old vector is not written again. After the
first pass another one reads everything again; the caller drops the old attribute only after a
pass that found nothing left to copy. All of it is idempotent: a run that stopped anywhere is
run again from the start.
"""

from __future__ import annotations

import logging
from typing import Any

from memory_client.schema_names import (
    LEGACY_VECTOR_ATTRIBUTE,
    MEMORY_SCOPE_EDGE,
    MEMORY_SCOPE_VERTEX,
    MEMORY_VECTOR_ATTRIBUTE,
    MEMORY_VERTEX,
    Q_SCAN_PAGE,
)
from memory_server.index.tigergraph._client import Client, TigerGraphIndexError, printed

PAGE = 500
# Passes over every vertex before giving up: the first copies, the next must find nothing.
_MAX_PASSES = 3
log = logging.getLogger(__name__)


def _floats(value: Any) -> list[float] | None:
    return [float(x) for x in value] if isinstance(value, list) and value else None


async def _pass(client: Client, with_scopes: bool, page_size: int) -> int:
    """One pass over every memory vertex; returns how many vectors it copied."""
    after = ""
    copied = 0
    while True:
        page = printed(await client.query(Q_SCAN_PAGE, {"after": after, "n": page_size}), "s")
        if not page:
            return copied
        copies: dict[str, dict[str, Any]] = {}
        scopes: dict[str, dict[str, dict[str, Any]]] = {}
        without = 0
        for vertex in page:
            vid = str(vertex["v_id"])
            vectors = vertex.get("Embeddings") or {}
            old = _floats(vectors.get(LEGACY_VECTOR_ATTRIBUTE))
            if old is None:
                without += 1
            elif _floats(vectors.get(MEMORY_VECTOR_ATTRIBUTE)) != old:
                copies[vid] = {MEMORY_VECTOR_ATTRIBUTE: {"value": old}}
            scope = (vertex.get("attributes") or {}).get("scope_hash")
            if with_scopes and scope:
                scopes.setdefault(str(scope), {})[vid] = {}
        if without and with_scopes:
            log.warning(
                "%d %s vertices have no %r vector to copy",
                without,
                MEMORY_VERTEX,
                LEGACY_VECTOR_ATTRIBUTE,
            )
        if copies:
            await client.upsert(
                "migrate vectors", {"vertices": {MEMORY_VERTEX: copies}}, update_vertex_only=True
            )
            copied += len(copies)
        if scopes:
            data = {
                "vertices": {MEMORY_SCOPE_VERTEX: {scope: {} for scope in scopes}},
                "edges": {
                    MEMORY_SCOPE_VERTEX: {
                        scope: {MEMORY_SCOPE_EDGE: {MEMORY_VERTEX: members}}
                        for scope, members in scopes.items()
                    }
                },
            }
            await client.upsert("migrate scopes", data, vertex_must_exist=True)
        if len(page) < page_size:
            return copied
        after = max(str(vertex["v_id"]) for vertex in page)


async def copy_legacy_vectors(client: Client, page_size: int = PAGE) -> int:
    """Copies every old vector to `memory_vector` and links every memory vertex to its scope
    vertex; returns how many vectors the first pass copied. Raises when a later pass still
    finds vectors to copy (the old attribute must then stay)."""
    copied = await _pass(client, True, page_size)
    for _ in range(_MAX_PASSES - 1):
        again = await _pass(client, False, page_size)
        if not again:
            return copied
        log.warning("%d vectors were still not copied after a pass; copying again", again)
    raise TigerGraphIndexError(
        f"TigerGraph did not keep the copies of {MEMORY_VERTEX}.{LEGACY_VECTOR_ATTRIBUTE} in "
        f"{MEMORY_VECTOR_ATTRIBUTE}; the old attribute is kept, run the install again"
    )
