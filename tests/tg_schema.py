"""The stand-in's catalog (tests/tg_server.py): the vertex and edge types and schema change jobs
of one graph, changed by the GSQL schema change statements the memory index and GraphRAG send,
and shown the two ways TigerGraph shows them: `getSchema()`'s JSON and the text of `ls`.

Statements understood, inside `CREATE SCHEMA_CHANGE JOB j [FOR GRAPH g] { ... }` and applied by
`RUN SCHEMA_CHANGE JOB j` (all or nothing, as TigerGraph's "Modifying a Graph Schema" says a
failed job returns to the state before the attempt): ADD VERTEX, ADD DIRECTED|UNDIRECTED EDGE
(several FROM/TO pairs, WITH REVERSE_EDGE), ALTER VERTEX … ADD|DROP VECTOR ATTRIBUTE, and
ALTER VERTEX … ADD INDEX (accepted, not modelled). They are recognised with regular
expressions: TigerGraph publishes no GSQL parser.

`ls` is written as TigerGraph 4.2 writes it, as far as published examples show:
- "Vertex Types:" lines `  - VERTEX Person(PRIMARY_ID name STRING, age INT) WITH
  STATS="OUTDEGREE_BY_EDGETYPE"`, "Edge Types:" lines `  - UNDIRECTED EDGE friendship(FROM
  person, TO person, connect_day DATETIME)`, then "Graphs:", "Jobs:", "Queries:" (tigergraph/
  ecosys demos/guru_scripts/tigergraph_notebook/gsql101.ipynb, the output of `ls`; the same
  shape in docs.tigergraph.com gsql-ref/3.10 tutorials/gsql-101, "Run the ls command").
- "Vector Embeddings:" with a line per vertex type and one per vector attribute:
  `  - Person:` / `    - embedding(Dimension=1536, IndexType="HNSW", DataType="FLOAT",
  Metric="COSINE")` (tigergraph/tigergraph-mcp tigergraph_mcp/tools/vector_tools.py,
  list_vector_attributes, which parses that section of `USE GRAPH g\\nLS`, and its
  tests/test_vector_tools.py sample). Where TigerGraph puts the section among the others is not
  shown there; here it follows "Edge Types:". GraphRAG only searches the whole text for
  `- embedding(Dimension=` and `- VERTEX ResolvedEntity` (graphrag/app/supportai/supportai.py).
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

_STATS = 'WITH STATS="OUTDEGREE_BY_EDGETYPE"'


@dataclass
class VertexType:
    name: str
    primary_id: tuple[str, str]  # (name, type)
    attributes: list[tuple[str, str]] = field(default_factory=list)
    vectors: dict[str, tuple[int, str]] = field(default_factory=dict)  # name -> (dim, metric)
    primary_id_as_attribute: bool = False

    def attribute_names(self) -> set[str]:
        names = {a for a, _ in self.attributes}
        return names | {self.primary_id[0]} if self.primary_id_as_attribute else names


@dataclass
class EdgeType:
    name: str
    directed: bool
    pairs: list[tuple[str, str]]
    attributes: list[tuple[str, str]] = field(default_factory=list)
    reverse: str | None = None


class GsqlError(Exception):
    """A statement TigerGraph would refuse; the message is the text gsql() would print."""


def _split_top(text: str) -> list[str]:
    """Splits on the commas outside <> and ()."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return [p for p in parts if p]


def _attributes(items: list[str]) -> list[tuple[str, str]]:
    out = []
    for item in items:
        item = re.sub(r"^DISCRIMINATOR\((.*)\)$", r"\1", item, flags=re.I | re.S)
        name, _, kind = item.partition(" ")
        out.append((name, re.sub(r"\s+DEFAULT\s+.*$", "", kind.strip(), flags=re.I)))
    return out


def _option(options: str, key: str) -> str | None:
    m = re.search(rf'{key}\s*=\s*"([^"]*)"', options or "", re.I)
    return m.group(1) if m else None


class Catalog:
    def __init__(self) -> None:
        self.vertex_types: dict[str, VertexType] = {}
        self.edge_types: dict[str, EdgeType] = {}
        self.jobs: dict[str, str] = {}  # name -> body

    def vector_dimension(self, vertex: str, attr: str) -> int | None:
        vt = self.vertex_types.get(vertex)
        return vt.vectors[attr][0] if vt is not None and attr in vt.vectors else None

    # -- schema change jobs -------------------------------------------------------------------
    def run_job(self, name: str) -> list[tuple[str, str]]:
        """Applies job `name` all or nothing; returns the (vertex type, attribute) pairs of the
        vector attributes it dropped. Raises GsqlError for anything TigerGraph would refuse."""
        if name not in self.jobs:
            raise GsqlError(f"Semantic Check Fails: the job {name} does not exist.")
        trial = copy.deepcopy((self.vertex_types, self.edge_types))
        dropped: list[tuple[str, str]] = []
        for statement in self.jobs[name].split(";"):
            if statement.strip():
                self._apply(" ".join(statement.split()), trial[0], trial[1], dropped)
        self.vertex_types, self.edge_types = trial
        return dropped

    def _apply(
        self,
        st: str,
        vts: dict[str, VertexType],
        ets: dict[str, EdgeType],
        dropped: list[tuple[str, str]],
    ) -> None:
        if m := re.match(r"ADD VERTEX (\w+)\s*\((.*)\)\s*(WITH .*)?$", st, re.I):
            name, items, options = m.group(1), _split_top(m.group(2)), m.group(3) or ""
            if name in vts:
                raise GsqlError(f"Semantic Check Fails: The vertex name {name} already exists!")
            first = re.match(r"PRIMARY_ID (\w+) (\w+)$", items[0], re.I)
            if first is None:
                raise GsqlError(f"Syntax Error: no PRIMARY_ID in ADD VERTEX {name}")
            as_attr = (_option(options, "PRIMARY_ID_AS_ATTRIBUTE") or "").lower() == "true"
            vts[name] = VertexType(
                name, (first.group(1), first.group(2)), _attributes(items[1:]), {}, as_attr
            )
        elif m := re.match(
            r"ADD (DIRECTED|UNDIRECTED) EDGE (\w+)\s*\((.*)\)\s*(WITH .*)?$", st, re.I
        ):
            name, inner = m.group(2), m.group(3)
            if name in ets:
                raise GsqlError(f"Semantic Check Fails: The edge name {name} already exists!")
            pairs = re.findall(r"FROM\s+(\w+)\s*,\s*TO\s+(\w+)", inner, re.I)
            for end in {v for pair in pairs for v in pair}:
                if end not in vts:
                    raise GsqlError(f"Semantic Check Fails: vertex type {end} does not exist.")
            last = list(re.finditer(r"TO\s+\w+", inner, re.I))[-1]
            attrs = _attributes(_split_top(inner[last.end() :].lstrip(" ,")))
            directed = m.group(1).upper() == "DIRECTED"
            reverse = _option(m.group(4) or "", "REVERSE_EDGE")
            ets[name] = EdgeType(name, directed, list(pairs), attrs, reverse)
        elif m := re.match(r"ALTER VERTEX (\w+) ADD VECTOR ATTRIBUTE (\w+)\s*\((.*)\)$", st, re.I):
            vt = vts.get(m.group(1))
            if vt is None:
                raise GsqlError(f"Semantic Check Fails: vertex type {m.group(1)} does not exist.")
            if m.group(2) in vt.vectors or m.group(2) in vt.attribute_names():
                raise GsqlError(f"Semantic Check Fails: attribute {m.group(2)} already exists.")
            dim = re.search(r"DIMENSION\s*=\s*(\d+)", m.group(3), re.I)
            if dim is None:
                raise GsqlError("Syntax Error: a vector attribute needs DIMENSION")
            metric = _option(m.group(3), "METRIC") or "COSINE"
            vt.vectors[m.group(2)] = (int(dim.group(1)), metric.upper())
        elif m := re.match(r"ALTER VERTEX (\w+) DROP VECTOR ATTRIBUTE (\w+)$", st, re.I):
            vt = vts.get(m.group(1))
            if vt is None or m.group(2) not in vt.vectors:
                raise GsqlError(
                    f"Semantic Check Fails: vector attribute {m.group(2)} does not exist."
                )
            del vt.vectors[m.group(2)]
            dropped.append((m.group(1), m.group(2)))
        elif re.match(r"ALTER VERTEX \w+ ADD INDEX ", st, re.I):
            pass  # secondary indexes change nothing the stand-in answers
        else:
            raise GsqlError(f"Syntax Error: the stand-in does not know {st[:80]!r}")

    # -- what pyTigerGraph and `ls` show ------------------------------------------------------
    def schema_json(self, graph: str, others: list[dict[str, Any]]) -> dict[str, Any]:
        """getSchema()'s shape (GET /gsql/v1/schema/graphs/{graph}); `others` are vertex types
        given as such dicts, listed before the catalog's own."""
        vertices: list[dict[str, Any]] = []
        for vt in self.vertex_types.values():
            entry: dict[str, Any] = {
                "Name": vt.name,
                "PrimaryId": {
                    "AttributeName": vt.primary_id[0],
                    "AttributeType": {"Name": vt.primary_id[1]},
                    "PrimaryIdAsAttribute": vt.primary_id_as_attribute,
                },
                "Attributes": [
                    {"AttributeName": a, "AttributeType": {"Name": t}} for a, t in vt.attributes
                ],
                "Config": {"STATS": "OUTDEGREE_BY_EDGETYPE"},
            }
            if vt.vectors:
                entry["EmbeddingAttributes"] = [
                    {
                        "Name": n,
                        "Dimension": d,
                        "IndexType": "HNSW",
                        "DataType": "FLOAT",
                        "Metric": m,
                    }
                    for n, (d, m) in vt.vectors.items()
                ]
            vertices.append(entry)
        edges = []
        for et in self.edge_types.values():
            one = len(et.pairs) == 1
            edges.append(
                {
                    "Name": et.name,
                    "FromVertexTypeName": et.pairs[0][0] if one else "*",
                    "ToVertexTypeName": et.pairs[0][1] if one else "*",
                    "IsDirected": et.directed,
                    "EdgePairs": [{"From": a, "To": b} for a, b in et.pairs],
                    "Config": {"REVERSE_EDGE": et.reverse} if et.reverse else {},
                    "Attributes": [
                        {"AttributeName": a, "AttributeType": {"Name": t}} for a, t in et.attributes
                    ],
                }
            )
        return {"GraphName": graph, "VertexTypes": list(others) + vertices, "EdgeTypes": edges}

    def ls(self, graph: str, others: list[dict[str, Any]], queries: dict[str, str]) -> str:
        """The text of `USE GRAPH graph` + `ls`; `queries` maps names to their created texts."""
        schema = self.schema_json(graph, others)
        lines = [f"---- Graph {graph}", "Vertex Types:"]
        vectors: list[str] = []
        for v in schema["VertexTypes"]:
            pid = v.get("PrimaryId") or {}
            items = [
                f"PRIMARY_ID {pid.get('AttributeName', 'id')} "
                f"{(pid.get('AttributeType') or {}).get('Name', 'STRING')}"
            ]
            items += [
                f"{a['AttributeName']} {a['AttributeType']['Name']}"
                for a in v.get("Attributes") or []
            ]
            lines.append(f"  - VERTEX {v['Name']}({', '.join(items)}) {_STATS}")
            embeddings = v.get("EmbeddingAttributes") or []
            if embeddings:
                vectors.append(f"  - {v['Name']}:")
            for e in embeddings:
                vectors.append(
                    f'    - {e["Name"]}(Dimension={e["Dimension"]}, IndexType="HNSW", '
                    f'DataType="FLOAT", Metric="{str(e.get("Metric", "COSINE")).upper()}")'
                )
        lines.append("Edge Types:")
        for et in self.edge_types.values():
            ends = "|".join(f"FROM {a}, TO {b}" for a, b in et.pairs)
            attrs = "".join(f", {a} {t}" for a, t in et.attributes)
            kind = "DIRECTED" if et.directed else "UNDIRECTED"
            tail = f' WITH REVERSE_EDGE="{et.reverse}"' if et.reverse else ""
            lines.append(f"  - {kind} EDGE {et.name}({ends}{attrs}){tail}")
        if vectors:
            lines += ["Vector Embeddings:", *vectors]
        members = [f"{v['Name']}:v" for v in schema["VertexTypes"]]
        members += [f"{e}:e" for e in self.edge_types]
        lines += ["", "Graphs:", f"  - Graph {graph}({', '.join(members)})", "Jobs:"]
        for name, body in self.jobs.items():
            lines.append(f"  - CREATE SCHEMA_CHANGE JOB {name} FOR GRAPH {graph} {{")
            lines += [f"      {s.strip()};" for s in body.split(";") if s.strip()]
            lines.append("    }")
        lines.append("Queries:")
        for name, text in sorted(queries.items()):
            m = re.search(rf"{name}\s*\(([^)]*)\)", text)
            lines.append(f"  - {name}({' '.join((m.group(1) if m else '').split())})")
        return "\n".join(lines) + "\n"
