"""Installing what the memory index needs in the user's graph, each piece only where missing:
the `MemoryEmbedding` vertex type with its COSINE vector attribute `memory_vector`, the
`MemoryScope` vertex type with its `MemoryOfScope` edges to a scope's memory vertices, the
`MemoryLink` edge type and the `Memory_*` queries; and moving a graph of an earlier release
(vector attribute `embedding`, no scope vertices) onto them (_migrate).

Order matters on a real server: the types and the new vector attribute first, then the
queries (whose texts name only the new names), then the migration's copy, and only then the
schema change that drops `embedding` — which uninstalls any query still naming it, so the
queries are checked once more after it. Every step looks at the graph first, so a run that
stopped anywhere (both vector attributes present, a job left behind) is simply run again.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from memory_client.schema_names import (
    JOB_ADD_TYPES,
    JOB_ADD_VECTOR,
    JOB_DROP_LEGACY_VECTOR,
    LEGACY_VECTOR_ATTRIBUTE,
    MEMORY_JOBS,
    MEMORY_LINK_EDGE,
    MEMORY_QUERIES,
    MEMORY_SCOPE_EDGE,
    MEMORY_SCOPE_VERTEX,
    MEMORY_VECTOR_ATTRIBUTE,
    MEMORY_VERTEX,
    Q_COUNT_SCOPE,
)
from memory_server.index.tigergraph._client import (
    Client,
    ConnArgs,
    TigerGraphIndexError,
    check_graph,
)
from memory_server.index.tigergraph._gsql import (
    ADD_LINK_EDGE,
    ADD_MEMORY_VERTEX,
    ADD_SCOPE_EDGE,
    ADD_SCOPE_VERTEX,
    ADD_VECTOR,
    DROP_LEGACY_VECTOR,
    GSQL_DROP_JOB,
    GSQL_INSTALL,
    GSQL_JOB,
    GSQL_LS,
    SCHEMA_HASH,
    query_text,
)
from memory_server.index.tigergraph._migrate import copy_legacy_vectors

MIN_VERSION = (4, 2)
log = logging.getLogger(__name__)

# What TigerGraph's GSQL text output says when a statement failed (gsql() never raises).
_GSQL_FAILURES = (
    'Encountered "',
    "SEMANTIC ERROR",
    "Semantic Check Fails",
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


def _vector_attribute(vertex: dict[str, Any] | None, name: str) -> dict[str, Any] | None:
    """A vector attribute of a vertex type as the schema describes it (TigerGraph 4.x has used
    both keys); None when the vertex type has none of that name."""
    for key in ("EmbeddingAttributes", "VectorAttributes"):
        for attr in (vertex or {}).get(key) or []:
            if isinstance(attr, dict) and attr.get("Name") == name:
                return attr
    return None


def _check_dimension(attr: dict[str, Any] | None, name: str, dimension: int) -> None:
    if attr is None or attr.get("Dimension") is None:
        return
    stored = int(attr["Dimension"])
    if stored != dimension:
        raise TigerGraphIndexError(
            f"{MEMORY_VERTEX}.{name} holds {stored}-dimensional vectors, the embedder makes "
            f"{dimension}; re-embed"
        )


async def _installed_schema(client: Client) -> str | None:
    """The query version the installed Memory_count_scope prints; None before versions."""
    res = await client.query(Q_COUNT_SCOPE, {"scope": ""})
    for item in res:
        if isinstance(item, dict) and "schema" in item:
            return str(item["schema"])
    return None


async def _gsql(client: Client, what: str, text: str, timeout_s: float | None = None) -> str:
    conn = client.conn
    return _check_gsql(await client.call(what, lambda: conn.gsql(text), timeout_s), what)


async def _drop_left_over_jobs(client: Client, graph: str) -> None:
    """Drops a job of ours that a run stopped between CREATE and DROP JOB left in the catalog
    (the `Jobs:` section of `ls`), so that CREATE can make it again. The listing is the user's
    whole catalog: only searched, never checked for failure words."""
    conn = client.conn
    listing = str(await client.call("ls", lambda: conn.gsql(GSQL_LS.format(graph=graph))))
    for job in MEMORY_JOBS:
        if re.search(rf"SCHEMA_CHANGE JOB {job}\b", listing):
            log.info("dropping the schema change job %s a previous install left behind", job)
            await _gsql(client, "drop job", GSQL_DROP_JOB.format(graph=graph, job=job))


async def _schema_change(client: Client, graph: str, job: str, body: str) -> None:
    await _gsql(client, f"schema change {job}", GSQL_JOB.format(graph=graph, job=job, body=body))


async def _install_queries(client: Client, graph: str, install_timeout_s: float | None) -> bool:
    """Creates and installs the Memory_* queries that are missing or of another version."""
    conn = client.conn
    endpoints = await client.call("endpoints", lambda: conn.getEndpoints(dynamic=True))
    prefix = f"/query/{graph}/"
    installed = {
        ep.split(prefix, 1)[1] for ep in (endpoints or {}) if isinstance(ep, str) and prefix in ep
    }
    missing = [q for q in MEMORY_QUERIES if q not in installed]
    # The installed ones must be of this version too: only then is installing the missing
    # ones enough (a graph of an earlier release lacks only the queries added since).
    version_seen = await _installed_schema(client) if Q_COUNT_SCOPE in installed else None
    if version_seen != SCHEMA_HASH:
        if installed & set(MEMORY_QUERIES):
            log.info(
                "installed Memory_* queries are version %s, this server's are %s: "
                "reinstalling them",
                version_seen,
                SCHEMA_HASH,
            )
        missing = list(MEMORY_QUERIES)
    if not missing:
        return False
    create = f"USE GRAPH {graph}\n" + "\n".join(query_text(q, graph) for q in missing)
    await _gsql(client, "create queries", create)
    install = GSQL_INSTALL.format(graph=graph, names=", ".join(missing))
    await _gsql(client, "install queries", install, install_timeout_s)
    return True


async def install_schema(
    conn_args: ConnArgs, dimension: int, install_timeout_s: float | None = None
) -> bool:
    """Creates the memory types, the vector attribute and the Memory_* queries where missing
    or changed, and migrates a graph of an earlier release. Idempotent; returns whether
    anything changed. Refuses TigerGraph < 4.2, and a stored vector dimension other than
    `dimension` (a clear error: re-embed), before changing anything.

    INSTALL QUERY compiles the queries on the server; TigerGraph publishes no bound on how
    long that takes, so that one statement gets install_timeout_s (default: the connection's
    timeout) and a timeout is Unavailable, for the caller to retry."""
    if not isinstance(dimension, int) or not 1 <= dimension <= 4096:
        raise ValueError(f"vector dimension must be 1..4096, not {dimension!r}")
    graph = check_graph(conn_args.graph)
    client = Client(conn_args)
    try:
        conn = client.conn
        ver_text = str(await client.call("version", lambda: conn.getVer()))
        if _parse_version(ver_text)[:2] < MIN_VERSION:
            raise TigerGraphIndexError(
                f"TigerGraph {ver_text} has no vector attributes; the memory vector index needs "
                f"TigerGraph >= {MIN_VERSION[0]}.{MIN_VERSION[1]}"
            )
        schema = await client.call("schema", lambda: conn.getSchema(udts=False, force=True))
        schema = schema or {}
        vertices = {
            v.get("Name"): v for v in schema.get("VertexTypes", []) or [] if isinstance(v, dict)
        }
        edges = {e.get("Name") for e in schema.get("EdgeTypes", []) or [] if isinstance(e, dict)}
        memory = vertices.get(MEMORY_VERTEX)
        vector = _vector_attribute(memory, MEMORY_VECTOR_ATTRIBUTE)
        legacy = _vector_attribute(memory, LEGACY_VECTOR_ATTRIBUTE)
        _check_dimension(vector, MEMORY_VECTOR_ATTRIBUTE, dimension)
        _check_dimension(legacy, LEGACY_VECTOR_ATTRIBUTE, dimension)

        types = "".join(
            statement
            for statement, present in (
                (ADD_MEMORY_VERTEX, memory is not None),
                (ADD_SCOPE_VERTEX, MEMORY_SCOPE_VERTEX in vertices),
                (ADD_SCOPE_EDGE, MEMORY_SCOPE_EDGE in edges),
                (ADD_LINK_EDGE, MEMORY_LINK_EDGE in edges),
            )
            if not present
        )
        changes = [(JOB_ADD_TYPES, types)] if types else []
        if vector is None:
            changes.append((JOB_ADD_VECTOR, ADD_VECTOR.format(dimension=dimension)))
        if changes or legacy is not None:
            await _drop_left_over_jobs(client, graph)
        for job, body in changes:
            await _schema_change(client, graph, job, body)
        changed = await _install_queries(client, graph, install_timeout_s) or bool(changes)
        if legacy is not None:
            copied = await copy_legacy_vectors(client)
            log.info(
                "copied %d vectors from %s.%s to %s; dropping the old attribute",
                copied,
                MEMORY_VERTEX,
                LEGACY_VECTOR_ATTRIBUTE,
                MEMORY_VECTOR_ATTRIBUTE,
            )
            await _schema_change(client, graph, JOB_DROP_LEGACY_VECTOR, DROP_LEGACY_VECTOR)
            # A schema change uninstalls the queries that name what it dropped.
            await _install_queries(client, graph, install_timeout_s)
            changed = True
        return changed
    finally:
        await client.aclose()
