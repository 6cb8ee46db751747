"""GraphRAG's memory test plan, end to end over real gRPC, driven through the client package:

* same conversation: a follow-up only short-term memory can answer has the earlier exchange;
* a planted standing preference becomes a live fact row for that user and graph;
* a new conversation of the same user and graph gets it back through long-term memory, with no
  short-term memory of the planting conversation; nobody else gets it;
* the first message on a graph with no facts loads neither the embedder, the vector index nor
  mem0 (the plan runs in a process of its own: tests/graphrag_plan.py);
* the memory index's names do not appear in the schema and query lists the agent is shown.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from pyTigerGraph import TigerGraphConnection  # type: ignore[import-untyped]

from memory_client.graphrag import GraphRAGMemory, hide_memory_queries, hide_memory_schema

from conftest import ServerFactory, assert_eventually, new_id
from fake_openai import FakeLLM
from tg_index import server_settings
from tg_server import TGState, serve_tigergraph

PLAN = Path(__file__).with_name("graphrag_plan.py")
NOTHING_LOADED = {"embedder": False, "vector_index": False, "mem0": False, "onnxruntime": False}
FRENCH = "Wants the assistant to always answer in French"


async def _run_plan(*args: str) -> dict[str, Any]:
    # Outside the checkout (PostgreSQL may run as another user), and removed after: each run's
    # data directory holds a whole cluster (~47 MB).
    data_dir = tempfile.mkdtemp(prefix="graphrag-memory-plan-", dir="/tmp")
    try:
        result = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, str(PLAN), data_dir, *args],
            capture_output=True,
            text=True,
            timeout=110,
        )
    finally:
        await asyncio.to_thread(shutil.rmtree, data_dir, True)
    assert result.returncode == 0, result.stderr
    report: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return report


def _check_memory_plan(report: dict[str, Any]) -> None:
    assert report["first_message"] == {"loaded": NOTHING_LOADED, "recalled": 0}

    follow_up = report["follow_up"]
    assert follow_up["recent"] == [
        "Which accounts share a device with account 4471?",
        "Accounts 5120 and 9983 share device D-77 with it.",
    ]
    assert "Accounts 5120 and 9983 share device D-77 with it." in follow_up["block"]
    assert "Which of them was flagged?" not in follow_up["block"]

    assert report["facts_after_plant"] == [FRENCH]

    fresh = report["new_conversation"]
    assert fresh["facts"] == [[FRENCH, True]]
    assert FRENCH in fresh["block"]
    assert fresh["recent"] == [] and fresh["summary"] == ""
    for said in ("always answer in French.", "4471", "je répondrai"):
        assert said not in fresh["block"]
    assert not fresh["degraded"]
    # The probes are live: recall loaded the embedder and the index once there were facts.
    assert fresh["loaded"]["embedder"] and fresh["loaded"]["vector_index"]

    assert report["isolation"] == {"other_user": [], "other_graph": []}


@pytest.mark.slow
async def test_graphrag_test_plan_on_the_embedded_defaults() -> None:
    report = await _run_plan()
    _check_memory_plan(report)
    assert report["after_first_reply"] == {"loaded": NOTHING_LOADED}


@pytest.mark.slow
async def test_graphrag_test_plan_with_an_llm_loads_mem0_only_after_a_reply(
    fake_llm: FakeLLM,
) -> None:
    # The endpoint's replies are not what mem0 or the reconciler can parse, so extraction falls
    # back to the offline rules: the plan holds, and mem0 was still started for the reply.
    report = await _run_plan(fake_llm.base_url)
    _check_memory_plan(report)
    assert report["after_first_reply"]["loaded"]["mem0"] is True
    assert report["after_first_reply"]["loaded"]["vector_index"] is False


_GRAPHRAG_VERTICES = [
    {"Name": name, "PrimaryId": {"AttributeName": "id"}, "Attributes": [], "Config": {}}
    for name in ("Document", "DocumentChunk", "Entity", "Community")
]
_GRAPHRAG_QUERIES = {"GraphRAG_Community_Search", "Chunk_Sibling_Search", "Memory_of_user_query"}


async def test_memory_index_is_hidden_from_the_agent_visible_schema(
    start_server: ServerFactory,
) -> None:
    state = TGState(
        other_vertex_types=list(_GRAPHRAG_VERTICES), installed_queries=set(_GRAPHRAG_QUERIES)
    )
    with serve_tigergraph(state) as tg:
        server = await start_server(
            **server_settings(tg),
            fact_extract_async=False,
        )
        user = new_id("alice")
        async with GraphRAGMemory.connect(server.address) as memory:
            turn = await memory.begin_turn(user, "GraphRAG", new_id(), "Always answer in French.")
            await memory.complete_turn(turn, "D'accord.")

            async def indexed() -> bool:
                return any(v for v in tg.state.vertices.values())

            await assert_eventually(indexed, what="the fact's vector reached TigerGraph")

        # What GraphRAG's backend reads from TigerGraph before it shows the graph to the agent.
        def read_graph() -> tuple[dict[str, Any], list[str]]:
            conn = TigerGraphConnection(
                host=tg.url, graphname=tg.state.graph, apiToken="good-token", tgCloud=True
            )
            return conn.getSchema(force=True), list(conn.getEndpoints(dynamic=True))

        schema, endpoints = await asyncio.to_thread(read_graph)

    raw_vertices = {v["Name"] for v in schema["VertexTypes"]}
    assert "MemoryEmbedding" in raw_vertices  # the index is really in the user's graph
    raw_queries = {e.rsplit("/", 1)[-1] for e in endpoints}
    assert {"Memory_search", "Memory_vectors"} <= raw_queries

    shown_vertices = {v["Name"] for v in hide_memory_schema(schema)["VertexTypes"]}
    assert shown_vertices == {"Document", "DocumentChunk", "Entity", "Community"}
    shown_queries = {e.rsplit("/", 1)[-1] for e in hide_memory_queries(endpoints)}
    assert shown_queries == _GRAPHRAG_QUERIES
    assert "MemoryEmbedding" not in json.dumps(hide_memory_schema(schema))
