"""A loopback stand-in for TigerGraph 4.2 speaking the HTTP protocol pyTigerGraph 2.0.5 uses.

It keeps MemoryEmbedding vertices in a dict, implements the installed Memory_* queries in
Python with the same semantics as the GSQL (as-of prefilter, then cosine top-k), accepts the
installer's GSQL statements (recording them and the query texts installed), mints tokens, and
can be taken down. Where the real server's answers are published, it answers the same way:

- `PRINT s WITH VECTOR` puts vectors under "Embeddings", not in "attributes"
  (tigergraph/ecosys tutorials/vector/q3.out and q1c.out).
- New vectors are searchable only after the HNSW index is rebuilt; until then
  GET /restpp/vector/status/{graph}/{vertex}/{attr} lists "NeedRebuildServers"
  (ecosys tutorials/VectorSearch.md, "Vector Update"). `index_lag_s` models that delay.
- Errors are JSON bodies {"error": true, "message", "code": "REST-xxxx"} (REST-10016 for a
  refused token, REST-1000 for a missing endpoint: pyTigerGraph common/auth.py; REST-3002 for
  a query past the server's timeout: TigerGraph's return-code reference), or a plain 503 as a
  proxy in front of a down server sends.
- vectorSearch is approximate: "top-k ANN (approximate nearest neighbor) vector search",
  HNSW by default (ecosys tutorials/VectorSearch.md, "Approximate Nearest Neighbors (ANN)").
  `ann_recall` below 1 makes the stand-in miss that share of the candidates, chosen by a hash of
  the vertex id and the query vector (so the same search misses the same vertices), and rank the
  rest exactly: what a search with a small exploration factor returns.
- What vectorSearch does with an empty candidate set is not documented: the stand-in takes
  the unsafe reading (no filter at all) unless the installed Memory_search re-checks the scope
  of its hits, so a query without that guard fails the isolation tests.
- Installed queries answer as the text that was installed: Memory_count_scope prints the
  `PRINT "<version>" AS schema` of its installed text, if any.
- The MemoryLink edge type (`ADD UNDIRECTED EDGE MemoryLink (FROM MemoryEmbedding, TO
  MemoryEmbedding, ...)` in a schema change job) is listed under "EdgeTypes" the way getSchema
  shows one (Name, FromVertexTypeName, ToVertexTypeName, IsDirected, Attributes). Edges come
  in the upsert body under "edges" as {source type: {source id: {edge type: {target type:
  {target id: attrs}}}}} (docs.tigergraph.com, REST API "Upsert data to graph"); the reply
  counts them in "accepted_edges". With `vertex_must_exist=true` an edge whose end does not
  exist is skipped, not accepted; vertices of the same request are upserted first. An
  undirected edge is one edge whichever end it is sent from; deleting a vertex deletes its
  edges, as in TigerGraph."""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

VERTEX = "MemoryEmbedding"
LINK = "MemoryLink"


@dataclass
class TGState:
    graph: str = "GraphRAG"
    version: str = "4.2.1"
    secret: str = "s3cret"
    tokens: set[str] = field(default_factory=lambda: {"good-token"})
    # Database users (name -> password) for HTTP Basic auth on GSQL endpoints and for
    # POST /gsql/v1/tokens without a secret (TigerGraph 4.x "Request a token": a user's
    # credentials in the Authorization header; pyTigerGraph common/auth.py sends authMode "pwd").
    users: dict[str, str] = field(default_factory=lambda: {"tigergraph": "tg-password"})
    vertex_installed: bool = False
    vector_dimension: int | None = None
    created_queries: set[str] = field(default_factory=set)
    installed_queries: set[str] = field(default_factory=set)
    vertices: dict[str, dict[str, Any]] = field(default_factory=dict)
    link_installed: bool = False
    # Undirected MemoryLink edges by their (smaller id, larger id).
    edges: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    statements: list[str] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    # "up" | "503" (plain text, a proxy's answer) | "json503" (HTTP 503 with a JSON error
    # body) | "query_timeout" (REST-3002 in a JSON error body, as REST++ sends it)
    mode: str = "up"
    installed_texts: dict[str, str] = field(default_factory=dict)
    created_texts: dict[str, str] = field(default_factory=dict)
    index_lag_s: float = 0.0  # seconds until an upserted vector is searchable
    ann_recall: float = 1.0  # share of the candidates vectorSearch's HNSW walk finds
    upserted_at: dict[str, float] = field(default_factory=dict)
    other_vertex_types: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _version_text(version: str) -> str:
    stamp = f"release_{version}_05-20-2025 0123abcd 2025-05-20 10:00:00 -0700"
    return (
        "TigerGraph RESTPP: \n --- Version --- \n"
        f"TigerGraph version: {version}\n"
        f"product {stamp}\ngpe {stamp}\nrestpp {stamp}\n"
    )


def _ann_finds(vid: str, qv: list[float], recall: float) -> bool:
    """Whether the approximate search reaches `vid` for this query (deterministic)."""
    digest = hashlib.sha256(f"{vid}|{qv}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < recall


def _cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0


def _str(v: Any) -> str:
    return unquote(v) if isinstance(v, str) else str(v)


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    # -- plumbing ----------------------------------------------------------------------------
    def _send(self, status: int, body: Any, text: bool = False) -> None:
        data = (body if text else json.dumps(body)).encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain" if text else "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, message: str, code: str = "", status: int = 200) -> None:
        self._send(status, {"error": True, "message": message, "code": code, "results": []})

    def _ok(self, results: Any, message: str = "") -> None:
        self._send(200, {"error": False, "message": message, "results": results})

    def _body(self) -> bytes:
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def _authorized(self, gsql: bool) -> bool:
        st = self.server.state
        auth = self.headers.get("Authorization", "")
        if auth.startswith("Bearer ") and auth[7:] in st.tokens:
            return True
        if gsql and auth.startswith("Basic "):
            return self._basic_user() is not None
        return False

    def _basic_user(self) -> str | None:
        """The user an HTTP Basic header names, when its password (or the GSQL secret) fits."""
        st = self.server.state
        auth = self.headers.get("Authorization", "")
        if not auth.startswith("Basic "):
            return None
        user, _, pw = base64.b64decode(auth[6:]).decode().partition(":")
        if user == "__GSQL__secret" and pw == st.secret:
            return user
        return user if st.users.get(user) == pw else None

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def _dispatch(self, method: str) -> None:
        st = self.server.state
        url = urlsplit(self.path)
        path, qs = url.path, parse_qs(url.query)
        body = self._body()
        if st.mode == "503":
            self._send(503, "Service Unavailable", text=True)
            return
        if st.mode == "json503":
            self._error("The service is unavailable, please try again later.", "REST-5000", 503)
            return
        if st.mode == "query_timeout" and path.startswith("/restpp/"):
            self._error(
                "Runtime Error: query exceeded the query timeout threshold (16 seconds). "
                "Try increase RESTPP.Factory.DefaultQueryTimeoutSec or add header "
                "GSQL-TIMEOUT to override default system timeout.",
                "REST-3002",
            )
            return
        g = st.graph
        if path == "/gsql/v1/tokens" and method == "POST":
            st.counts["tokens"] += 1
            req = json.loads(body or b"{}")
            by_secret = "secret" in req and req["secret"] == st.secret
            if not by_secret and ("secret" in req or self._basic_user() is None):
                self._error("Authentication failed.", status=401)
                return
            st.counts["tokens_by_secret" if by_secret else "tokens_by_password"] += 1
            token = uuid.uuid4().hex
            st.tokens.add(token)
            self._send(
                200,
                {
                    "error": False,
                    "message": "",
                    "results": {"token": token},
                    "expiration": 2_000_000_000,
                },
            )
            return
        is_gsql = path.startswith("/gsql/")
        if not self._authorized(is_gsql):
            st.counts["unauthorized"] += 1
            self._send(
                401,
                {
                    "error": True,
                    "code": "REST-10016",
                    "message": "Access Denied because the input token is invalid.",
                },
            )
            return
        with st.lock:
            if path == "/restpp/version":
                st.counts["version"] += 1
                self._send(
                    200, {"error": False, "message": _version_text(st.version), "results": []}
                )
            elif path == f"/gsql/v1/schema/graphs/{g}":
                st.counts["schema"] += 1
                self._ok(self._schema())
            elif path == "/gsql/v1/udt/tuples":
                st.counts["udts"] += 1
                self._ok([])  # no user-defined tuple types in this graph
            elif path == f"/restpp/endpoints/{g}":
                st.counts["endpoints"] += 1
                eps: dict[str, Any] = {}
                for q in sorted(st.installed_queries):
                    eps[f"GET /query/{g}/{q}"] = {"parameters": {}}
                    eps[f"POST /query/{g}/{q}"] = {"parameters": {}}
                self._send(200, eps)
            elif path == "/gsql/v1/statements" and method == "POST":
                st.counts["gsql"] += 1
                self._send(200, self._gsql(body.decode()), text=True)
            elif path.startswith(f"/restpp/vector/status/{g}/{VERTEX}"):
                # ecosys tutorials/VectorSearch.md, "Delayed Update Visibility": the reply
                # lists the servers whose index still needs a rebuild.
                st.counts["vector_status"] += 1
                pending = self._pending()
                self._send(
                    200,
                    {
                        "version": {"edition": "enterprise", "api": "v2", "schema": 0},
                        "error": False,
                        "message": "fetched status success",
                        "results": {"NeedRebuildServers": ["GPE_1#1"] if pending else []},
                        "code": "REST-0000",
                    },
                )
            elif path == f"/restpp/graph/{g}" and method == "POST":
                st.counts["upserts"] += 1
                must_exist = (qs.get("vertex_must_exist") or [""])[0].lower() == "true"
                self._upsert(json.loads(body), must_exist)
            elif path.startswith(f"/restpp/graph/{g}/vertices/") and method == "DELETE":
                st.counts["deletes"] += 1
                vid = unquote(path.rsplit("/", 1)[1])
                n = 1 if st.vertices.pop(vid, None) is not None else 0
                self._drop_edges({vid})
                self._send(
                    200,
                    {
                        "error": False,
                        "message": "",
                        "results": {"v_type": VERTEX, "deleted_vertices": n},
                    },
                )
            elif path.startswith(f"/restpp/query/{g}/"):
                st.counts["queries"] += 1
                name = path.rsplit("/", 1)[1]
                st.counts["query:" + name] += 1
                if name not in st.installed_queries:
                    self._send(
                        404,
                        {
                            "error": True,
                            "code": "REST-1000",
                            "message": f"Endpoint is not found from url = {path}",
                        },
                    )
                    return
                params = (
                    json.loads(body or b"{}")
                    if method == "POST"
                    else {k: v[0] if len(v) == 1 else v for k, v in qs.items()}
                )
                self._query(name, params)
            else:
                self._error(f"Endpoint is not found from url = {path}", "REST-1000", 404)

    # -- GSQL ----------------------------------------------------------------------------------
    def _schema(self) -> dict[str, Any]:
        st = self.server.state
        vts = list(st.other_vertex_types)
        if st.vertex_installed:
            vt: dict[str, Any] = {
                "Name": VERTEX,
                "PrimaryId": {"AttributeName": "version_id"},
                "Attributes": [],
                "Config": {},
            }
            if st.vector_dimension is not None:
                vt["EmbeddingAttributes"] = [
                    {"Name": "embedding", "Dimension": st.vector_dimension, "Metric": "COSINE"}
                ]
            vts.append(vt)
        ets: list[dict[str, Any]] = []
        if st.link_installed:
            ets.append(
                {
                    "Name": LINK,
                    "FromVertexTypeName": VERTEX,
                    "ToVertexTypeName": VERTEX,
                    "IsDirected": False,
                    "Config": {},
                    "Attributes": [
                        {"AttributeName": "score", "AttributeType": {"Name": "FLOAT"}},
                        {"AttributeName": "recorded_at", "AttributeType": {"Name": "INT"}},
                        {"AttributeName": "superseded_at", "AttributeType": {"Name": "INT"}},
                    ],
                }
            )
        return {"GraphName": st.graph, "VertexTypes": vts, "EdgeTypes": ets}

    def _gsql(self, text: str) -> str:
        st = self.server.state
        st.statements.append(text)
        out: list[str] = []
        if "ADD VERTEX MemoryEmbedding" in text:
            if st.vertex_installed:
                return "Semantic Check Fails: The vertex name MemoryEmbedding already exists!"
            st.vertex_installed = True
            out.append("Successfully created schema change jobs: [Memory_add_vertex].")
            out.append("Local schema change succeeded.")
        if "ADD UNDIRECTED EDGE MemoryLink (FROM MemoryEmbedding, TO MemoryEmbedding" in text:
            if not st.vertex_installed:
                return "Semantic Check Fails: vertex type MemoryEmbedding does not exist."
            if st.link_installed:
                return "Semantic Check Fails: The edge name MemoryLink already exists!"
            st.link_installed = True
            out.append("Local schema change succeeded.")
        m = re.search(r"ADD VECTOR ATTRIBUTE embedding\(DIMENSION=(\d+)", text)
        if m:
            if not st.vertex_installed:
                return "Semantic Check Fails: vertex type MemoryEmbedding does not exist."
            if st.vector_dimension is not None:
                return "Semantic Check Fails: attribute embedding already exists."
            st.vector_dimension = int(m.group(1))
            out.append("Local schema change succeeded.")
        for m in re.finditer(r"CREATE OR REPLACE QUERY (\w+)\(", text):
            name = m.group(1)
            end = text.find("CREATE OR REPLACE QUERY", m.end())
            st.created_queries.add(name)
            st.created_texts[name] = text[m.start() : end if end >= 0 else len(text)]
            out.append(f"Successfully created queries: [{name}].")
        m = re.search(r"INSTALL QUERY ([\w, ]+)", text)
        if m:
            names = [n.strip() for n in m.group(1).split(",")]
            for n in names:
                if n not in st.created_queries:
                    return f"Query {n} does not exist."
            st.installed_queries.update(names)
            for n in names:
                st.installed_texts[n] = st.created_texts.get(n, "")
            out.append("Query installation finished.")
        return "\n".join(out) or "OK"

    # -- REST++ --------------------------------------------------------------------------------
    def _drop_edges(self, gone: set[str]) -> None:
        st = self.server.state
        for key in [k for k in st.edges if k[0] in gone or k[1] in gone]:
            del st.edges[key]

    def _upsert(self, doc: dict[str, Any], must_exist: bool = False) -> None:
        st = self.server.state
        accepted = 0
        accepted_edges = 0
        for vtype, vertices in doc.get("vertices", {}).items():
            if vtype != VERTEX or not st.vertex_installed:
                self._error(
                    f"The input vertex type {vtype} is not a valid vertex type.", "REST-30200"
                )
                return
            for vid, attrs in vertices.items():
                values = {k: v["value"] for k, v in attrs.items()}
                emb = values.get("embedding")
                if emb is not None and len(emb) != st.vector_dimension:
                    continue  # rejected, as TigerGraph skips a vertex it cannot take
                st.vertices[vid] = {**st.vertices.get(vid, {}), **values}
                if emb is not None:
                    st.upserted_at[vid] = time.monotonic()
                accepted += 1
        for stype, sources in doc.get("edges", {}).items():
            for sid, by_edge in sources.items():
                for etype, by_target in by_edge.items():
                    if stype != VERTEX or etype != LINK or not st.link_installed:
                        self._error(
                            f"The input edge type {etype} is not a valid edge type.",
                            "REST-30200",
                        )
                        return
                    for ttype, targets in by_target.items():
                        for tid, attrs in targets.items():
                            if ttype != VERTEX:
                                continue
                            if must_exist and (sid not in st.vertices or tid not in st.vertices):
                                continue
                            key = (min(sid, tid), max(sid, tid))
                            values = {k: v["value"] for k, v in attrs.items()}
                            st.edges[key] = {**st.edges.get(key, {}), **values}
                            accepted_edges += 1
        self._ok([{"accepted_vertices": accepted, "accepted_edges": accepted_edges}])

    def _query(self, name: str, p: dict[str, Any]) -> None:
        st = self.server.state
        if name == "Memory_search":
            scope, tx, vt = _str(p["scope"]), int(p["tx_time"]), int(p["valid_time"])

            def believed(v: dict[str, Any]) -> bool:
                return (
                    v["scope_hash"] == scope
                    and v["recorded_at"] <= tx < v["superseded_at"]
                    and v["valid_from"] <= vt < v["valid_to"]
                )

            # Only what the HNSW index holds is found (see _pending).
            indexed = {vid: v for vid, v in st.vertices.items() if self._searchable(vid)}
            cands = [(vid, v) for vid, v in indexed.items() if believed(v)]
            text = st.installed_texts.get(name, "")
            guarded = (
                "r = SELECT v FROM r:v" in text
                and "v.scope_hash == scope" in text.split("vectorSearch", 1)[-1]
            )
            if not cands and not guarded:
                cands = list(indexed.items())  # the unsafe reading: no candidate filter
            qv = [float(x) for x in p["qv"]]
            if st.ann_recall < 1.0:
                cands = [(vid, v) for vid, v in cands if _ann_finds(vid, qv, st.ann_recall)]
            ranked = sorted(((1.0 - _cosine(qv, v["embedding"]), vid) for vid, v in cands))
            top = ranked[: int(p["k"])]
            if guarded:
                top = [(d, vid) for d, vid in top if believed(st.vertices[vid])]
            self._ok(
                [
                    {
                        "r": [
                            {"v_id": vid, "v_type": VERTEX, "attributes": {"distance": d}}
                            for d, vid in top
                        ]
                    }
                ]
            )
        elif name == "Memory_count_scope":
            scope = _str(p["scope"])
            printed: list[dict[str, Any]] = [
                {"n": sum(1 for v in st.vertices.values() if v["scope_hash"] == scope)}
            ]
            m = re.search(r'PRINT "(\w+)" AS schema', st.installed_texts.get(name, ""))
            if m:
                printed.append({"schema": m.group(1)})
            self._ok(printed)
        elif name == "Memory_purge_scope":
            scope = _str(p["scope"])
            gone = [vid for vid, v in st.vertices.items() if v["scope_hash"] == scope]
            for vid in gone:
                del st.vertices[vid]
                st.upserted_at.pop(vid, None)
            self._drop_edges(set(gone))
            self._ok([{"deleted": len(gone)}])
        elif name == "Memory_delete_ids":
            ids = [_str(i) for i in p.get("ids") or []]
            gone = [i for i in ids if st.vertices.pop(i, None) is not None]
            self._drop_edges(set(gone))
            self._ok([{"deleted": len(gone)}])
        elif name == "Memory_vectors":
            ids = [_str(i) for i in p.get("ids") or []]
            # `PRINT s WITH VECTOR`: plain attributes under "attributes", vector attributes
            # under "Embeddings" (ecosys tutorials/vector/q3.out, q1c.out).
            self._ok(
                [
                    {
                        "s": [
                            {
                                "v_id": i,
                                "v_type": VERTEX,
                                "attributes": {
                                    **{k: v for k, v in st.vertices[i].items() if k != "embedding"},
                                    "version_id": i,
                                },
                                "Embeddings": {"embedding": st.vertices[i].get("embedding")},
                            }
                            for i in ids
                            if i in st.vertices
                        ]
                    }
                ]
            )
        else:
            self._error(f"unknown query {name}", "REST-1000")

    def _searchable(self, vid: str) -> bool:
        st = self.server.state
        at = st.upserted_at.get(vid)
        return at is None or time.monotonic() - at >= st.index_lag_s

    def _pending(self) -> bool:
        return any(not self._searchable(vid) for vid in self.server.state.vertices)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr: tuple[str, int], state: TGState) -> None:
        self.state = state
        super().__init__(addr, _Handler)


class TGServer:
    """Runs in a thread; `url` is the host pyTigerGraph takes (REST++ and GSQL on one port)."""

    def __init__(self, state: TGState | None = None) -> None:
        self.state = state or TGState()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self._server = _Server(("127.0.0.1", self.port), self.state)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None

    def expire_tokens(self) -> None:
        """Every token minted or configured so far is refused from now on (REST-10016)."""
        with self.state.lock:
            self.state.tokens.clear()

    def down(self, how: str = "refuse") -> None:
        """ "refuse": close the port (connection refused); "503": plain-text 503 to everything;
        "json503": 503 with a JSON error body; "query_timeout": REST-3002 for REST++ calls."""
        if how == "refuse":
            self.stop()
        else:
            self.state.mode = how

    def up(self) -> None:
        self.state.mode = "up"
        if self._server is None:
            self.start()

    @property
    def counts(self) -> Counter[str]:
        return self.state.counts


@contextmanager
def serve_tigergraph(state: TGState | None = None) -> Iterator[TGServer]:
    server = TGServer(state)
    server.start()
    try:
        yield server
    finally:
        server.stop()
