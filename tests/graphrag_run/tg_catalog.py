"""GSQL catalog text (`ls`) built from a getSchema() dict, in TigerGraph's layout: the global
catalog lists graphs as `- Graph G(V:v, E:e)` (what GraphRAG's `LS USER` parser reads, ui.py
GRAPH_NAME_RE), a graph's catalog lists vertex and edge types and, on 4.2, a `Vector
Embeddings:` section of `- embedding(Dimension=N, IndexType="HNSW", DataType="FLOAT",
Metric="COSINE")` lines under each vertex type (what GraphRAG's embedding store looks for)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def _type_text(t: dict[str, str]) -> str:
    return f"{t['Name']}<{t['ValueTypeName']}>" if "ValueTypeName" in t else t["Name"]


def global_catalog(schema: dict[str, Any], graphs: Iterable[str]) -> str:
    """The global `ls` as one user sees it: only the graphs the user may use."""
    members = [f"{v['Name']}:v" for v in schema["VertexTypes"]]
    members += [f"{e['Name']}:e" for e in schema["EdgeTypes"]]
    lines = ["---- Global vertices, edges, and all graphs", "Vertex Types:", "Edge Types:"]
    lines.append("Graphs:")
    lines += [f"  - Graph {g}({', '.join(members)})" for g in graphs]
    lines += ["Jobs:", "", "JSON API version: v2", "Syntax version: v2"]
    return "\n".join(lines)


def graph_catalog(graph: str, schema: dict[str, Any], queries: Iterable[str]) -> str:
    """`USE GRAPH g` then `ls`."""
    lines = [f"---- Graph {graph}", "Vertex Types:"]
    vectors: list[str] = []
    for vt in schema["VertexTypes"]:
        pid = vt.get("PrimaryId", {})
        cols = [f"PRIMARY_ID {pid.get('AttributeName', 'id')} STRING"]
        cols += [
            f"{a['AttributeName']} {_type_text(a['AttributeType'])}"
            for a in vt.get("Attributes", [])
        ]
        lines.append(
            f"  - VERTEX {vt['Name']}({', '.join(cols)}) "
            'WITH STATS="OUTDEGREE_BY_EDGETYPE", PRIMARY_ID_AS_ATTRIBUTE="true"'
        )
        for emb in vt.get("EmbeddingAttributes", []):
            vectors.append(f"  - {vt['Name']}:")
            vectors.append(
                f'    - {emb["Name"]}(Dimension={emb["Dimension"]}, IndexType="HNSW", '
                f'DataType="FLOAT", Metric="{emb.get("Metric", "COSINE")}")'
            )
    lines.append("Edge Types:")
    for et in schema["EdgeTypes"]:
        pairs = et.get("EdgePairs") or [
            {"From": et["FromVertexTypeName"], "To": et["ToVertexTypeName"]}
        ]
        ends = "|".join(f"FROM {p['From']}, TO {p['To']}" for p in pairs)
        attrs = "".join(
            f", {a['AttributeName']} {_type_text(a['AttributeType'])}"
            for a in et.get("Attributes", [])
        )
        kind = "DIRECTED" if et.get("IsDirected") else "UNDIRECTED"
        reverse = et.get("Config", {}).get("REVERSE_EDGE")
        suffix = f' WITH REVERSE_EDGE="{reverse}"' if reverse else ""
        lines.append(f"  - {kind} EDGE {et['Name']}({ends}{attrs}){suffix}")
    lines += ["", "Vector Embeddings:", *vectors, "", "Queries:"]
    lines += [f"  - {q}()" for q in sorted(queries)]
    return "\n".join(lines)
