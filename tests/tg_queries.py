"""The stand-in's `Memory_*` installed queries (tests/tg_server.py), in Python, each answering as
the text actually installed under its name says, and counting the vertices it touches.

Where a query starts is read from its installed text, and decides both what it can find and
what it touches:
- `{MemoryEmbedding.*}`: every memory vertex of every scope is read (touched), then filtered by
  `scope_hash`;
- `to_vertex_set(@@seed, "MemoryScope")` and a hop `-(MemoryOfScope>:e)-`: only the scope's
  vertex and the memory vertices its edges reach are touched, and only those can be found (a
  memory vertex upserted without its edge is invisible, as it would be in TigerGraph);
- `to_vertex_set(ids, "MemoryEmbedding")`: the vertices with those ids.
`vectorSearch` ranks the candidates it was given (all indexed vectors, touched, in the unsafe
reading of an empty candidate set: see tg_server). The touched counts go to
`TGState.touched[query name]`, one per vertex per call.
"""

from __future__ import annotations

import hashlib
import math
import re
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

if TYPE_CHECKING:
    from tg_server import TGState

VERTEX = "MemoryEmbedding"
SCOPE = "MemoryScope"
SCOPE_EDGE = "MemoryOfScope"


class QueryError(Exception):
    """The query cannot run as installed (the message is REST++'s)."""


def _str(v: Any) -> str:
    return unquote(v) if isinstance(v, str) else str(v)


def _ann_finds(vid: str, qv: list[float], recall: float) -> bool:
    """Whether the approximate search reaches `vid` for this query (deterministic)."""
    digest = hashlib.sha256(f"{vid}|{qv}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < recall


def _cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0


def seed(text: str) -> str:
    """ "all", "scope" or "ids": where the installed text starts."""
    if re.search(r"\{MemoryEmbedding\.\*\}", text):
        return "all"
    if re.search(r'to_vertex_set\(\s*@@\w+\s*,\s*"MemoryScope"\s*\)', text) and re.search(
        r"-\(MemoryOfScope>:\w+\)-", text
    ):
        return "scope"
    if re.search(r'to_vertex_set\(\s*ids\s*,\s*"MemoryEmbedding"\s*\)', text):
        return "ids"
    return "none"


class Queries:
    def __init__(self, state: TGState) -> None:
        self.st = state
        self.touched: set[tuple[str, str]] = set()

    def searchable(self, vid: str) -> bool:
        at = self.st.upserted_at.get(vid)
        return at is None or time.monotonic() - at >= self.st.index_lag_s

    def _scope_members(self, name: str, scope: str) -> list[str]:
        """The memory vertices the query's seed reaches that carry `scope`."""
        vertices = self.st.vertices
        start = seed(self.st.installed_texts.get(name, ""))
        if start == "all":
            self.touched |= {(VERTEX, vid) for vid in vertices}
            reached = list(vertices)
        else:
            if start != "scope" or scope not in self.st.store.get(SCOPE, {}):
                return []
            self.touched.add((SCOPE, scope))
            reached = [t for s, t in self.st.edge_store.get(SCOPE_EDGE, {}) if s == scope]
            self.touched |= {(VERTEX, vid) for vid in reached}
        return [vid for vid in reached if vertices[vid].get("scope_hash") == scope]

    def _with_vectors(self, vid: str) -> dict[str, Any]:
        """One vertex as `PRINT s WITH VECTOR` prints it: plain attributes under "attributes",
        vector attributes under "Embeddings" (ecosys tutorials/vector/q3.out, q1c.out)."""
        vt = self.st.catalog.vertex_types[VERTEX]
        values = self.st.vertices[vid]
        return {
            "v_id": vid,
            "v_type": VERTEX,
            "attributes": {
                **{k: v for k, v in values.items() if k not in vt.vectors},
                "version_id": vid,
            },
            "Embeddings": {k: values[k] for k in vt.vectors if k in values},
        }

    def run(self, name: str, p: dict[str, Any]) -> list[dict[str, Any]]:
        text = self.st.installed_texts.get(name, "")
        if name == "Memory_search":
            out = self._search(text, p)
        elif name == "Memory_count_scope":
            out = [{"n": len(self._scope_members(name, _str(p["scope"])))}]
            m = re.search(r'PRINT "(\w+)" AS schema', text)
            if m:
                out.append({"schema": m.group(1)})
        elif name == "Memory_purge_scope":
            scope = _str(p["scope"])
            gone = self._scope_members(name, scope)
            for vid in gone:
                self.st.delete_vertex(VERTEX, vid)
            if "DELETE v FROM sc:v" in text:
                self.st.delete_vertex(SCOPE, scope)
            out = [{"deleted": len(gone)}]
        elif name == "Memory_delete_ids":
            ids = [i for i in (_str(i) for i in p.get("ids") or []) if i in self.st.vertices]
            self.touched |= {(VERTEX, i) for i in ids}
            for i in ids:
                self.st.delete_vertex(VERTEX, i)
            out = [{"deleted": len(ids)}]
        elif name == "Memory_vectors":
            ids = [i for i in (_str(i) for i in p.get("ids") or []) if i in self.st.vertices]
            self.touched |= {(VERTEX, i) for i in ids}
            out = [{"s": [self._with_vectors(i) for i in ids]}]
        elif name == "Memory_scan_page":
            if seed(text) != "all":
                raise QueryError("Memory_scan_page as installed reads no vertex")
            self.touched |= {(VERTEX, vid) for vid in self.st.vertices}
            after, n = _str(p["after"]), int(p["n"])
            page = sorted(vid for vid in self.st.vertices if vid > after)[:n]
            out = [{"s": [self._with_vectors(vid) for vid in page]}]
        else:
            raise QueryError(f"unknown query {name}")
        self.st.touched[name] += len(self.touched)
        return out

    def _search(self, text: str, p: dict[str, Any]) -> list[dict[str, Any]]:
        st = self.st
        scope, tx, vt = _str(p["scope"]), int(p["tx_time"]), int(p["valid_time"])
        m = re.search(r"vectorSearch\(\{MemoryEmbedding\.(\w+)\}", text)
        attr = m.group(1) if m else ""
        if st.catalog.vector_dimension(VERTEX, attr) is None:
            raise QueryError(f"vector attribute {attr!r} does not exist")

        def believed(v: dict[str, Any]) -> bool:
            return (
                v.get("scope_hash") == scope
                and v["recorded_at"] <= tx < v["superseded_at"]
                and v["valid_from"] <= vt < v["valid_to"]
            )

        # Only what the HNSW index holds is found (see TGState.index_lag_s).
        cands = [
            vid
            for vid in self._scope_members("Memory_search", scope)
            if believed(st.vertices[vid]) and self.searchable(vid)
        ]
        guarded = (
            "r = SELECT v FROM r:v" in text
            and "v.scope_hash == scope" in text.split("vectorSearch", 1)[-1]
        )
        if not cands and not guarded:
            # The unsafe reading of an empty candidate set: no filter at all.
            cands = [vid for vid in st.vertices if self.searchable(vid)]
            self.touched |= {(VERTEX, vid) for vid in cands}
        qv = [float(x) for x in p["qv"]]
        if st.ann_recall < 1.0:
            cands = [vid for vid in cands if _ann_finds(vid, qv, st.ann_recall)]
        ranked = sorted(
            (1.0 - _cosine(qv, st.vertices[vid][attr]), vid)
            for vid in cands
            if st.vertices[vid].get(attr) is not None
        )
        top = ranked[: int(p["k"])]
        if guarded:
            top = [(d, vid) for d, vid in top if believed(st.vertices[vid])]
        hits = [{"v_id": vid, "v_type": VERTEX, "attributes": {"distance": d}} for d, vid in top]
        return [{"r": hits}]
