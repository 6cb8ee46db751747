"""A loopback stand-in for TigerGraph 4.2 speaking the HTTP protocol pyTigerGraph 2.0.5 uses.

It keeps one graph: a catalog of vertex and edge types changed by GSQL schema change jobs
(tests/tg_schema.py, which also writes `getSchema()` and `ls`), the vertices and edges of those
types, the installed `Memory_*` queries implemented in Python with the semantics of the GSQL
text actually installed (tests/tg_queries.py: where a query starts decides what it finds and
which vertices it touches, counted per query name in `touched`), tokens, and can be taken down.
Any vertex type can be created and hold data, GraphRAG's with their own `embedding` vector
attribute as well as the memory's. Where the real server's answers are published, it answers
the same way:

- `USE GRAPH g` + `ls` (POST /gsql/v1/statements) answers the catalog as TigerGraph 4.2 prints
  it: "Vertex Types:" (`  - VERTEX Name(PRIMARY_ID id STRING, ...) WITH
  STATS="OUTDEGREE_BY_EDGETYPE"`), "Edge Types:", "Vector Embeddings:" (`  - Name:` then
  `    - attr(Dimension=n, IndexType="HNSW", DataType="FLOAT", Metric="COSINE")`), "Graphs:",
  "Jobs:", "Queries:" (ecosys demos/guru_scripts/tigergraph_notebook/gsql101.ipynb;
  tigergraph/tigergraph-mcp tigergraph_mcp/tools/vector_tools.py, list_vector_attributes, and
  its tests/test_vector_tools.py; details in tests/tg_schema.py).
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
  `PRINT "<version>" AS schema` of its installed text, if any. A schema change job that drops
  a vector attribute uninstalls the queries naming it ("A query becomes invalid if it refers to
  ... an attribute which has been dropped ... invalid queries are uninstalled":
  docs.tigergraph.com, "Modifying a Graph Schema") and removes its values.
- Upserts (POST /restpp/graph/{graph}) take {"vertices": {type: {id: attrs}}, "edges":
  {source type: {source id: {edge type: {target type: {target id: attrs}}}}}} (docs.tigergraph
  .com, REST API "Upsert data to graph"); the reply counts "accepted_vertices" and
  "accepted_edges". An unknown type or attribute is refused (REST-30200); a vector of another
  dimension skips its vertex. With `vertex_must_exist=true` an edge whose end does not exist is
  skipped, not accepted (vertices of the same request are upserted first); with
  `update_vertex_only=true` a vertex that does not exist is skipped. An undirected edge is one
  edge whichever end it is sent from; deleting a vertex deletes its edges, as in TigerGraph."""

from __future__ import annotations

import base64
import json
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

from tg_queries import Queries, QueryError
from tg_schema import Catalog, GsqlError

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
    catalog: Catalog = field(default_factory=Catalog)
    created_queries: set[str] = field(default_factory=set)
    installed_queries: set[str] = field(default_factory=set)
    # Vertices by type and id (vector attributes among the others); edges by type and
    # (source id, target id), an undirected edge under (smaller id, larger id).
    store: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    edge_store: dict[str, dict[tuple[str, str], dict[str, Any]]] = field(default_factory=dict)
    statements: list[str] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    # Vertices each installed query touched, summed over its calls (tests/tg_queries.py).
    touched: Counter[str] = field(default_factory=Counter)
    # "up" | "503" (plain text, a proxy's answer) | "json503" (HTTP 503 with a JSON error
    # body) | "query_timeout" (REST-3002 in a JSON error body, as REST++ sends it)
    mode: str = "up"
    installed_texts: dict[str, str] = field(default_factory=dict)
    created_texts: dict[str, str] = field(default_factory=dict)
    index_lag_s: float = 0.0  # seconds until an upserted vector is searchable
    ann_recall: float = 1.0  # share of the candidates vectorSearch's HNSW walk finds
    upserted_at: dict[str, float] = field(default_factory=dict)
    # Vertex types given as getSchema() dicts (listed by getSchema and `ls`, holding no data).
    other_vertex_types: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def vertices(self) -> dict[str, dict[str, Any]]:
        """The MemoryEmbedding vertices by version id."""
        return self.store.setdefault(VERTEX, {})

    @property
    def edges(self) -> dict[tuple[str, str], dict[str, Any]]:
        """The MemoryLink edges by (smaller id, larger id)."""
        return self.edge_store.setdefault(LINK, {})

    def delete_vertex(self, vtype: str, vid: str) -> bool:
        """Deletes a vertex and every edge at it; whether it existed."""
        if self.store.get(vtype, {}).pop(vid, None) is None:
            return False
        self.upserted_at.pop(vid, None)
        for name, et in self.catalog.edge_types.items():
            ends = [(i, p[i]) for p in et.pairs for i in (0, 1)]
            gone = [
                key
                for key in self.edge_store.get(name, {})
                if any(t == vtype and key[i] == vid for i, t in ends)
            ]
            for key in gone:
                del self.edge_store[name][key]
        return True


def _version_text(version: str) -> str:
    stamp = f"release_{version}_05-20-2025 0123abcd 2025-05-20 10:00:00 -0700"
    return (
        "TigerGraph RESTPP: \n --- Version --- \n"
        f"TigerGraph version: {version}\n"
        f"product {stamp}\ngpe {stamp}\nrestpp {stamp}\n"
    )


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
            elif path.startswith(f"/restpp/vector/status/{g}/"):
                # ecosys tutorials/VectorSearch.md, "Delayed Update Visibility": the reply
                # lists the servers whose index still needs a rebuild.
                st.counts["vector_status"] += 1
                queries = Queries(st)
                pending = any(not queries.searchable(vid) for vid in st.vertices)
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
                flags = {k for k, v in qs.items() if v and v[0].lower() == "true"}
                self._upsert(json.loads(body), flags)
            elif path.startswith(f"/restpp/graph/{g}/vertices/") and method == "DELETE":
                st.counts["deletes"] += 1
                vtype, vid = (unquote(p) for p in path.rsplit("/", 2)[1:])
                n = int(st.delete_vertex(vtype, vid))
                self._send(
                    200,
                    {
                        "error": False,
                        "message": "",
                        "results": {"v_type": vtype, "deleted_vertices": n},
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
        return st.catalog.schema_json(st.graph, st.other_vertex_types)

    def _gsql(self, text: str) -> str:
        """POST /gsql/v1/statements: `ls`, schema change jobs (create, run, drop), and
        CREATE OR REPLACE QUERY / INSTALL QUERY; the printed text, failures included (pyTigerGraph's
        gsql() does not raise on them)."""
        st = self.server.state
        st.statements.append(text)
        out: list[str] = []
        try:
            for m in re.finditer(
                r"CREATE SCHEMA_CHANGE JOB (\w+)(?:\s+FOR GRAPH \w+)?\s*\{(.*?)\}", text, re.S
            ):
                if m.group(1) in st.catalog.jobs:
                    raise GsqlError(f"Semantic Check Fails: The job {m.group(1)} already exists!")
                st.catalog.jobs[m.group(1)] = m.group(2)
                out.append(f"Successfully created schema change jobs: [{m.group(1)}].")
            for m in re.finditer(r"RUN SCHEMA_CHANGE JOB (?:-\w+ )*(\w+)", text):
                for vtype, attr in st.catalog.run_job(m.group(1)):
                    self._dropped(vtype, attr)
                out.append("Local schema change succeeded.")
            for m in re.finditer(r"DROP JOB (\w+)", text):
                if st.catalog.jobs.pop(m.group(1), None) is None:
                    raise GsqlError(f"Semantic Check Fails: the job {m.group(1)} does not exist.")
                out.append(f"Successfully dropped jobs on the graph {st.graph}: [{m.group(1)}].")
        except GsqlError as exc:
            return "\n".join([*out, str(exc)])
        if any(line.strip().lower() == "ls" for line in text.splitlines()):
            out.append(st.catalog.ls(st.graph, st.other_vertex_types, st.created_texts))
        for m in re.finditer(r"CREATE OR REPLACE (?:DISTRIBUTED )?QUERY (\w+)\(", text):
            name = m.group(1)
            end = text.find("CREATE OR REPLACE", m.end())
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

    def _dropped(self, vtype: str, attr: str) -> None:
        """A vector attribute dropped: its values go, and the queries that name it."""
        st = self.server.state
        for values in st.store.get(vtype, {}).values():
            values.pop(attr, None)
        for name, text in st.installed_texts.items():
            if re.search(rf"\b{vtype}\.{attr}\b", text):
                st.installed_queries.discard(name)

    # -- REST++ --------------------------------------------------------------------------------
    def _upsert(self, doc: dict[str, Any], flags: set[str]) -> None:
        st = self.server.state
        types = st.catalog.vertex_types
        accepted = 0
        accepted_edges = 0
        for vtype, vertices in doc.get("vertices", {}).items():
            vt = types.get(vtype)
            if vt is None:
                self._error(
                    f"The input vertex type {vtype} is not a valid vertex type.", "REST-30200"
                )
                return
            for vid, attrs in vertices.items():
                values = {k: v["value"] for k, v in attrs.items()}
                unknown = set(values) - vt.attribute_names() - set(vt.vectors)
                if unknown:
                    self._error(
                        f"The input attribute {sorted(unknown)[0]} is not a valid attribute of "
                        f"vertex type {vtype}.",
                        "REST-30200",
                    )
                    return
                vectors = {k: v for k, v in values.items() if k in vt.vectors}
                if any(len(v) != vt.vectors[k][0] for k, v in vectors.items()):
                    continue  # rejected, as TigerGraph skips a vertex it cannot take
                store = st.store.setdefault(vtype, {})
                if "update_vertex_only" in flags and vid not in store:
                    continue
                store[vid] = {**store.get(vid, {}), **values}
                if vtype == VERTEX and vectors:
                    st.upserted_at[vid] = time.monotonic()
                accepted += 1
        for stype, sources in doc.get("edges", {}).items():
            for sid, by_edge in sources.items():
                for etype, by_target in by_edge.items():
                    et = st.catalog.edge_types.get(etype)
                    if et is None:
                        self._error(
                            f"The input edge type {etype} is not a valid edge type.",
                            "REST-30200",
                        )
                        return
                    for ttype, targets in by_target.items():
                        pairs = et.pairs if et.directed else et.pairs + [p[::-1] for p in et.pairs]
                        if (stype, ttype) not in pairs:
                            continue
                        for tid, attrs in targets.items():
                            if "vertex_must_exist" in flags and not (
                                sid in st.store.get(stype, {}) and tid in st.store.get(ttype, {})
                            ):
                                continue
                            key = (sid, tid) if et.directed else (min(sid, tid), max(sid, tid))
                            edges = st.edge_store.setdefault(etype, {})
                            values = {k: v["value"] for k, v in attrs.items()}
                            edges[key] = {**edges.get(key, {}), **values}
                            accepted_edges += 1
        self._ok([{"accepted_vertices": accepted, "accepted_edges": accepted_edges}])

    def _query(self, name: str, params: dict[str, Any]) -> None:
        queries = Queries(self.server.state)
        try:
            self._ok(queries.run(name, params))
        except QueryError as exc:
            self._error(str(exc), "REST-1000")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self, addr: tuple[str, int], state: TGState, handler: type[_Handler] = _Handler
    ) -> None:
        self.state = state
        super().__init__(addr, handler)


class TGServer:
    """Runs in a thread; `url` is the host pyTigerGraph takes (REST++ and GSQL on one port).
    `handler` may be a subclass of the stand-in's handler that answers more endpoints (its
    `_dispatch(method)` first) or more GSQL (its `_gsql(text)`)."""

    def __init__(self, state: TGState | None = None, handler: type[_Handler] = _Handler) -> None:
        self.state = state or TGState()
        self._handler = handler
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self._server = _Server(("127.0.0.1", self.port), self.state, self._handler)
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

    @property
    def touched(self) -> Counter[str]:
        """Vertices each installed query touched, by query name, summed over its calls."""
        return self.state.touched


@contextmanager
def serve_tigergraph(
    state: TGState | None = None, handler: type[_Handler] = _Handler
) -> Iterator[TGServer]:
    server = TGServer(state, handler)
    server.start()
    try:
        yield server
    finally:
        server.stop()
