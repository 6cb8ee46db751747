"""GraphRAG's side of the stand-in graph: a small Finance graph with SupportAI's document types
(common/gsql/supportai/SupportAI_Schema.gsql, with their real attribute names and multi-pair
edges), the users, and the answers of the installed queries GraphRAG runs on a chat turn, in
the shapes their PRINT statements give (common/gsql/supportai/retrievers/*.gsql,
common/gsql/vector/*.gsql)."""

from __future__ import annotations

import ast
import json
import math
import re
from typing import Any

from .fake_llm import EMBEDDING_DIMENSION, embed_text

GRAPH = "Finance"
PASSWORDS = {"tigergraph": "tg-password", "alice": "alice-pw", "bob": "bob-pw"}
GLOBAL_ROLES = {"tigergraph": "superuser", "alice": "globalobserver", "bob": "globalobserver"}

# (name, [(attribute, type)], has an `embedding` vector attribute)
VERTICES: list[tuple[str, list[tuple[str, str]], bool]] = [
    ("Customer", [("name", "STRING"), ("segment", "STRING")], False),
    ("Account", [("balance", "DOUBLE"), ("currency", "STRING"), ("status", "STRING")], False),
    ("Document", [("epoch_added", "UINT")], True),
    ("DocumentChunk", [("idx", "INT"), ("epoch_added", "UINT")], True),
    ("Content", [("ctype", "STRING"), ("text", "STRING")], False),
    ("Entity", [("definition", "STRING"), ("description", "SET<STRING>")], True),
    ("Relationship", [("definition", "STRING"), ("short_name", "STRING")], True),
]
# (name, [(from, to)], directed)
EDGES: list[tuple[str, list[tuple[str, str]], bool]] = [
    ("HOLDS", [("Customer", "Account")], True),
    ("HAS_CHILD", [("Document", "DocumentChunk")], True),
    ("HAS_CONTENT", [("Document", "Content"), ("DocumentChunk", "Content")], True),
    ("CONTAINS_ENTITY", [("DocumentChunk", "Entity"), ("Document", "Entity")], True),
    ("IS_HEAD_OF", [("Entity", "Relationship")], True),
    ("HAS_TAIL", [("Relationship", "Entity")], True),
]
CHUNKS = {
    "chunk-overdraft-1": "Overdraft policy: an account that stays below zero for thirty days "
    "is frozen, and the customer is notified by the relationship manager.",
    "chunk-wires-1": "Wire transfers above ten thousand euros need two approvals from the "
    "treasury desk before they leave the bank.",
    "chunk-fx-1": "Foreign exchange: balances held in US dollars are converted to euros at "
    "the daily reference rate for the monthly statement.",
    "chunk-hybrid-1": "GraphRAG hybrid search starts from the chunks closest to the question "
    "and walks entities and relationships to gather more context.",
}
HOLDINGS = [
    {"customer": "Northwind Traders", "account": "ACC-1001", "balance": 25400.0, "currency": "EUR"},
    {"customer": "Contoso Ltd", "account": "ACC-2002", "balance": 1300.5, "currency": "USD"},
]
# What SupportAI's initialization installs on TigerGraph >= 4.2 (supportai/supportai.py); the
# embedding store installs its `vector` queries itself when GraphRAG starts.
PREINSTALLED = (
    "GraphRAG_Hybrid_Search",
    "GraphRAG_Community_Search",
    "Content_Similarity_Search",
    "Chunk_Sibling_Search",
    "GraphRAG_Hybrid_Vector_Search",
    "Content_Similarity_Vector_Search",
    "Chunk_Sibling_Vector_Search",
    "GraphRAG_Community_Vector_Search",
)


def _attr_type(spec: str) -> dict[str, str]:
    m = re.fullmatch(r"(\w+)<(\w+)>", spec)
    return {"Name": m[1], "ValueTypeName": m[2]} if m else {"Name": spec}


def vertex_type(name: str, attrs: list[tuple[str, str]], vector: bool) -> dict[str, Any]:
    """A vertex type as GET /gsql/v1/schema/graphs/{g} lists it."""
    vt: dict[str, Any] = {
        "Name": name,
        "PrimaryId": {
            "AttributeName": "id",
            "AttributeType": {"Name": "STRING"},
            "PrimaryIdAsAttribute": True,
        },
        "Attributes": [{"AttributeName": a, "AttributeType": _attr_type(t)} for a, t in attrs],
        "Config": {"STATS": "OUTDEGREE_BY_EDGETYPE", "PRIMARY_ID_AS_ATTRIBUTE": "true"},
        "IsLocal": True,
    }
    if vector:
        vt["EmbeddingAttributes"] = [
            {"Name": "embedding", "Dimension": EMBEDDING_DIMENSION, "Metric": "COSINE"}
        ]
    return vt


def edge_type(name: str, pairs: list[tuple[str, str]], directed: bool) -> dict[str, Any]:
    """An edge type as the schema lists it: an edge with several (from, to) pairs has "*"
    ends and `EdgePairs` (what pyTigerGraph's getEdgeSourceVertexType reads as a set)."""
    single = len(pairs) == 1
    et: dict[str, Any] = {
        "Name": name,
        "FromVertexTypeName": pairs[0][0] if single else "*",
        "ToVertexTypeName": pairs[0][1] if single else "*",
        "IsDirected": directed,
        "Config": {"REVERSE_EDGE": f"reverse_{name}"} if directed else {},
        "Attributes": [],
        "IsLocal": True,
    }
    if not single:
        et["EdgePairs"] = [{"From": f, "To": t} for f, t in pairs]
    return et


def _cos(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    na, nb = math.sqrt(sum(x * x for x in a)), math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0


def _floats(raw: Any) -> list[float]:
    items = raw if isinstance(raw, list) else [raw]
    return [float(x) for x in items if str(x).strip() != ""]


def ranked_chunks(query_vector: list[float], k: int) -> list[tuple[str, float]]:
    scored = [(cid, _cos(query_vector, embed_text(text))) for cid, text in CHUNKS.items()]
    return sorted(scored, key=lambda s: -s[1])[: max(k, 1)]


def run_query(name: str, p: dict[str, Any]) -> list[Any] | None:
    """One installed GraphRAG query's `results` (one object per PRINT), None if the stand-in
    does not serve it."""
    top_k = int(p.get("top_k", p.get("k", 5)) or 5)
    if name == "GraphRAG_Hybrid_Vector_Search":
        hits = ranked_chunks(_floats(p.get("query_vector", [])), top_k)
        out: list[Any] = [{"final_retrieval": {cid: [CHUNKS[cid]] for cid, _ in hits}}]
        if str(p.get("verbose", "")).lower() == "true":
            start = [{"v": cid, "t": "DocumentChunk"} for cid, _ in hits]
            out.append({"verbose": {"start_set": start, "selected_set": start}})
        return out
    if name == "GraphRAG_Hybrid_Search":
        start = ast.literal_eval(str(p.get("json_list_vts", "[]")) or "[]")
        ids = [s["v"] for s in start if s.get("v") in CHUNKS]
        return [{"final_retrieval": {cid: [CHUNKS[cid]] for cid in ids}}]
    if name == "get_topk_similar":  # PRINT @@topk_set as results (v_id, v_type, score)
        hits = ranked_chunks(_floats(p.get("query_vector", [])), top_k)
        return [{"results": [{"v_id": c, "v_type": "DocumentChunk", "score": s} for c, s in hits]}]
    if name == "check_embedding_exists":
        v_id, v_type = p.get("vertex_id", ""), p.get("vertex_type", "")
        return [{"results": [{"v_id": v_id, "v_type": v_type}] if v_id in CHUNKS else []}]
    if name == "vertices_have_embedding":
        return [{"all_have_embedding": True}]
    if name in ("get_topk_closest", "get_vertices_with_vector"):
        return [{"results": []}]
    return None


def cypher_output(text: str) -> str:
    """What `gsql()` returns for GraphRAG's `INTERPRET OPENCYPHER QUERY`: a first line the
    cypher branch drops, then the JSON reply it parses (`results[0]` is its answer)."""
    head = f"Using graph '{GRAPH}'"
    if "Customer" not in text or "Account" not in text:
        return f"{head}\nSemantic Check Fails: the pattern names no known vertex type."
    body = {"version": {"edition": "enterprise", "api": "v2", "schema": 1}, "error": False}
    body |= {"message": "", "results": [{"rows": HOLDINGS}]}
    return f"{head}\n{json.dumps(body)}"


def show_user(user: str) -> str:
    """`SHOW USER` as a user without READ_USER sees it: their own entry, in the layout of
    chat-history's parseUserRoles test (chat-history/routes/routes_test.go)."""
    if user not in PASSWORDS:
        return ""
    return (
        f"  - Name: {user}\n"
        f"    - Global Roles: {GLOBAL_ROLES.get(user, '')}\n"
        f"    - Graph '{GRAPH}' Roles: queryreader\n"
        "    - LastSuccessLogin: Mon Jul 22 06:57:29 UTC 2024\n"
        "    - FailedAttempts: 0\n"
        "    - ShowAlterPasswordWarning: false\n"
    )
