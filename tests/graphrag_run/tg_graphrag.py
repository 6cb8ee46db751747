"""The TigerGraph stand-in (tests/tg_server.py) extended with what GraphRAG cc4eed1 calls on
TigerGraph through pyTigerGraph 1.9.0, in one graph: the memory server's vector index and
GraphRAG's own data live side by side, so the memory types really are in the graph GraphRAG
lists. It composes tg_server's handler, server and TGState; memory calls go to them unchanged.

What GraphRAG calls, and the shapes answered (pyTigerGraph 1.9.0's readers; TigerGraph docs):

- `POST /gsql/v1/statements` (text): `LS USER` (ui.py `auth` parses graph names with
  `- Graph (.*)\\(`, the global catalog's line), `USE GRAPH g\\n ls` (the embedding store
  looks for `- embedding(Dimension=`), `import package gds` / `install function gds.**`, its
  query installs (`CREATE OR REPLACE DISTRIBUTED QUERY`, lower-case `install query`) and
  `INTERPRET OPENCYPHER QUERY` (graph_data.cypher_output).
- `GET /gsql/v1/schema/graphs/{g}`, `/gsql/v1/udt/tuples` (getVertexTypes, getEdgeTypes,
  getVertexType, getEdgeSourceVertexType: multi-pair edges as "*" with `EdgePairs`).
- `POST /gsql/v1/queries/interpret` (get_schema_ver reads the reply's `version.schema`),
  `POST /gsql/v1/queries/signature` (getQueryMetadata; `error: true` for a missing query
  makes the agent run without supportai), `GET /restpp/endpoints/{g}?dynamic=true`,
  `GET /restpp/version`.
- Installed queries as GraphRAG's connection proxy runs them, detached: `GSQL-ASYNC: true`
  answers a `request_id`; `GET /restpp/query_status` answers the documented Query Status
  shape (`results[0].status`), `GET /restpp/query_result` the query's `results`. The
  embedding store's own `get_topk_similar` runs synchronously (GET, lists repeated).
- REST++ with HTTP Basic credentials: with `getToken: false` (configs/server_config.json)
  GraphRAG's connections hold no token and pyTigerGraph sends Basic everywhere. Also
  `DELETE /gsql/v1/tokens` (the proxy drops its token when collected).

Every request is counted by who sent it: "memory" (the memory server's token), "test" (this
harness) or "graphrag" (Basic credentials), for the run report.
"""

from __future__ import annotations

import json
import random
import re
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from .graph_data import (
    EDGES,
    GRAPH,
    PASSWORDS,
    PREINSTALLED,
    VERTICES,
    cypher_output,
    edge_type,
    run_query,
    show_user,
    vertex_type,
)
from .tg_catalog import global_catalog, graph_catalog
from tg_server import TGServer, TGState, _Handler, _Server

PORT = 14240  # GraphRAG's UI login connects on pyTigerGraph's default port (ui.py `auth`)
MEMORY_TOKEN = "good-token"
TEST_TOKEN = "test-token"


@dataclass
class GraphRAGWorld:
    """GraphRAG's edge types, which graphs each user may use, and what was asked."""

    edge_types: list[dict[str, Any]] = field(default_factory=lambda: [edge_type(*e) for e in EDGES])
    user_graphs: dict[str, list[str]] = field(
        default_factory=lambda: {u: [GRAPH] for u in PASSWORDS}
    )
    calls: Counter[tuple[str, str]] = field(default_factory=Counter)
    statements: list[str] = field(default_factory=list)
    unserved: list[str] = field(default_factory=list)
    async_results: dict[str, tuple[str, list[Any]]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def calls_by(self, who: str) -> dict[str, int]:
        with self.lock:
            return {call: n for (w, call), n in sorted(self.calls.items()) if w == who}


def new_state() -> TGState:
    state = TGState(graph=GRAPH, users=dict(PASSWORDS), tokens={MEMORY_TOKEN, TEST_TOKEN})
    state.other_vertex_types = [vertex_type(*v) for v in VERTICES]
    state.installed_queries.update(PREINSTALLED)
    state.created_queries.update(PREINSTALLED)
    return state


_MINE = {
    ("GET", "/restpp/query_status"),
    ("GET", "/restpp/query_result"),
    ("POST", "/gsql/v1/queries/signature"),
    ("POST", "/gsql/v1/queries/interpret"),
    ("DELETE", "/gsql/v1/tokens"),
}


class GraphRAGHandler(_Handler):
    server: GraphRAGServer

    def _who(self) -> str:
        auth = self.headers.get("Authorization", "")
        return {f"Bearer {MEMORY_TOKEN}": "memory", f"Bearer {TEST_TOKEN}": "test"}.get(
            auth, "graphrag"
        )

    def _note(self, call: str) -> None:
        world = self.server.world
        with world.lock:
            world.calls[(self._who(), call)] += 1

    def _authorized(self, gsql: bool) -> bool:
        return super()._authorized(True)  # REST++ takes HTTP Basic too (see above)

    def _dispatch(self, method: str) -> None:
        url = urlsplit(self.path)
        g = self.server.state.graph
        self._note(f"{method} {url.path.replace(f'/{g}', '/{graph}')}")
        if (method, url.path) not in _MINE:
            super()._dispatch(method)
            return
        self._body()
        if not self._authorized(True):
            self._send(401, {"error": True, "code": "REST-10016", "message": "Access Denied"})
            return
        qs = {k: v[0] for k, v in parse_qs(url.query).items()}
        with self.server.state.lock:
            self._graphrag_endpoint(url.path, qs)

    def _graphrag_endpoint(self, path: str, qs: dict[str, str]) -> None:
        st, world = self.server.state, self.server.world
        if path in ("/restpp/query_status", "/restpp/query_result"):
            rid = qs.get("requestid", "")
            if rid not in world.async_results:
                self._error(f"Unknown request id {rid}.", "REST-1000")
                return
            url, results = world.async_results[rid]
            if path.endswith("query_result"):
                self._ok(results)
                return
            stamp = time.strftime("%Y-%m-%d %H:%M:%S.000")
            status = {"requestid": rid, "startTime": stamp, "expirationTime": stamp}
            self._ok([status | {"url": url, "elapsedTime": 3, "status": "success"}])
        elif path == "/gsql/v1/queries/signature":
            name = qs.get("queryName", "")
            if name not in st.installed_queries:
                self._error(f"Query '{name}' does not exist.", "GSQL-4001")
                return
            output = [{"final_retrieval": "MapAccum<VERTEX, SetAccum<STRING>>"}]
            body = {"error": False, "message": "", "queryname": name, "input": []}
            self._send(200, body | {"output": output})
        elif path == "/gsql/v1/queries/interpret":
            changes = [s for s in st.statements if "SCHEMA_CHANGE" in s.upper()]
            version = {"edition": "enterprise", "api": "v2", "schema": 1 + len(changes)}
            body = {"version": version, "error": False, "message": "", "results": [{"OK": "OK"}]}
            self._send(200, body)
        else:  # DELETE /gsql/v1/tokens
            self._send(200, {"error": False, "message": "Token is dropped."})

    def _schema(self) -> dict[str, Any]:
        schema = super()._schema()
        schema["EdgeTypes"] = [*self.server.world.edge_types, *schema["EdgeTypes"]]
        return schema

    def _gsql(self, text: str) -> str:
        st, world = self.server.state, self.server.world
        stripped = text.strip()
        if re.fullmatch(r"(?i)ls\s+user", stripped):
            graphs = world.user_graphs.get(self._basic_user() or "", [])
            kind, out = "LS USER", global_catalog(self._schema(), graphs)
        elif re.fullmatch(r"(?i)show\s+user", stripped):
            kind, out = "SHOW USER", show_user(self._basic_user() or "")
        elif re.fullmatch(r"(?is)use\s+graph\s+\w+\s*\n\s*ls", stripped):
            catalog = graph_catalog(st.graph, self._schema(), st.installed_queries)
            kind, out = "USE GRAPH g; ls", catalog
        elif "import package gds" in text.lower():
            kind = "USE GLOBAL; import package gds; install function gds.**"
            out = "Package gds is imported.\nFunctions installed: gds.**"
        elif "INTERPRET OPENCYPHER" in text.upper():
            kind, out = "INTERPRET OPENCYPHER QUERY", cypher_output(text)
        elif (installed := self._graphrag_install(text)) is not None:
            kind, out = "CREATE QUERY + install query (GraphRAG's)", installed
        elif re.fullmatch(r"(?i)use\s+graph\s+\w+", stripped):
            kind, out = "USE GRAPH g", f"Using graph '{stripped.split()[-1]}'"
        else:
            return super()._gsql(text)  # the memory server's installer
        with world.lock:
            world.statements.append(text)
        self._note(f"GSQL {kind}")
        return out

    def _graphrag_install(self, text: str) -> str | None:
        st = self.server.state
        pattern = r"(?i)CREATE\s+(?:OR\s+REPLACE\s+)?(?:DISTRIBUTED\s+)?QUERY\s+(\w+)\s*\("
        names = re.findall(pattern, text)
        if not names or any(n.startswith("Memory_") for n in names):
            return None
        st.created_queries.update(names)
        groups = re.findall(r"(?i)INSTALL\s+QUERY\s+([\w, ]+)", text)
        installed = {n.strip() for group in groups for n in group.split(",")} & set(names)
        st.installed_queries.update(installed)
        return f"Successfully created queries: [{', '.join(names)}].\nQuery installation finished."

    def _query(self, name: str, p: dict[str, Any]) -> None:
        if name.startswith("Memory_"):
            super()._query(name, p)
            return
        world = self.server.world
        results = run_query(name, p)
        if results is None:
            with world.lock:
                world.unserved.append(name)
            self._error(f"The stand-in does not run query {name}.", "REST-1000")
            return
        if self.headers.get("GSQL-ASYNC", "").lower() == "true":
            rid = f"{len(world.async_results) + 1}.RESTPP_1_1.{int(time.time() * 1000)}.N"
            with world.lock:
                world.async_results[rid] = (f"/query/{GRAPH}/{name}", results)
            self._send(200, {"error": False, "message": "", "request_id": rid})
            return
        self._ok(results)


class GraphRAGServer(_Server):
    def __init__(self, addr: tuple[str, int], state: TGState, world: GraphRAGWorld) -> None:
        self.state = state
        self.world = world
        ThreadingHTTPServer.__init__(self, addr, GraphRAGHandler)


class GraphRAGTigerGraph(TGServer):
    """The stand-in on a loopback address of its own at TigerGraph's port 14240: GraphRAG's UI
    login connects there whatever db_config says (routers/ui.py `auth` builds its connection
    with pyTigerGraph's default ports)."""

    def __init__(self, host: str) -> None:
        super().__init__(new_state())
        self.world = GraphRAGWorld()
        self.host = host
        self.port = PORT

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> None:
        self._server = GraphRAGServer((self.host, self.port), self.state, self.world)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def schema(self) -> dict[str, Any]:
        """The graph's schema as GraphRAG's getSchema() reads it (asked over HTTP)."""
        request = urllib.request.Request(
            f"{self.url}/gsql/v1/schema/graphs/{GRAPH}",
            headers={"Authorization": f"Bearer {TEST_TOKEN}"},
        )
        with urllib.request.urlopen(request, timeout=10) as reply:
            return dict(json.load(reply)["results"])

    def memory_type_names(self) -> set[str]:
        """The graph's vertex and edge types named like the memory's ("Memory...")."""
        schema = self.schema()
        names = {t["Name"] for t in schema["VertexTypes"] + schema["EdgeTypes"]}
        return {n for n in names if n.startswith("Memory")}


@contextmanager
def serve_graphrag_tigergraph() -> Iterator[GraphRAGTigerGraph]:
    """The extended stand-in on a random 127.x.y.z address (the whole 127/8 is loopback)."""
    last: OSError | None = None
    for _ in range(20):
        host = "127.{}.{}.{}".format(*(random.randint(1, 254) for _ in range(3)))
        server = GraphRAGTigerGraph(host)
        try:
            server.start()
        except OSError as e:  # that address's 14240 is taken
            last = e
            continue
        try:
            yield server
        finally:
            server.stop()
        return
    raise RuntimeError(f"no loopback address with port {PORT} free: {last}")
