"""The TigerGraph index under test, pointed at the loopback stand-in (tests/tg_server.py; the
`tg` fixture is in conftest): connection arguments and an index with a test's overrides."""

from __future__ import annotations

from memory_server.index.tigergraph import ConnArgs, TigerGraphIndex

from tg_server import TGServer

DIM = 4


def args(tg: TGServer, **kw: object) -> ConnArgs:
    base: dict[str, object] = {"host": tg.url, "graph": tg.state.graph, "token": "good-token"}
    base.update(kw)
    return ConnArgs(**base)  # type: ignore[arg-type]


def index(tg: TGServer, **kw: object) -> TigerGraphIndex:
    opts: dict[str, object] = {"token": "good-token", "dimension": DIM, "timeout_s": 5}
    opts.update(kw)
    return TigerGraphIndex(tg.url, tg.state.graph, **opts)  # type: ignore[arg-type]


def server_settings(tg: TGServer) -> dict[str, object]:
    """Settings overrides for a memory server whose vector index is the stand-in."""
    return {
        "vector_index": "tigergraph",
        "tigergraph_host": tg.url,
        "tigergraph_graph": tg.state.graph,
        "tigergraph_token": "good-token",
    }
