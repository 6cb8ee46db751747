"""GraphRAG's memory test plan, run in a process of its own (tests/test_graphrag_plan.py starts it).

The server runs on its embedded defaults (its own PostgreSQL in a fresh data directory, the
offline embedder and extractor; an LLM endpoint only when one is given) and is driven over real
gRPC through the client package's GraphRAG adapter, as GraphRAG's backend drives it. A process
of its own, because whether the embedder, the vector index or mem0 were ever loaded is only
observable in a process that has not loaded them for another test. Prints one JSON report.

    python tests/graphrag_plan.py DATA_DIR [LLM_BASE_URL]
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from typing import Any

from memory_client.graphrag import GraphRAGMemory
from memory_server.main import MemoryServer
from memory_server.settings import load_settings

PLANT = "From now on, always answer in French."


def _loaded(server: MemoryServer) -> dict[str, bool]:
    # A copy taken in one step: mem0 may be importing on a worker thread meanwhile, and
    # iterating sys.modules itself then fails ("dictionary changed size during iteration").
    modules = tuple(sys.modules)
    return {
        "embedder": server.embedder.loaded,
        "vector_index": server.index.loaded,
        "mem0": any(m == "mem0" or m.startswith("mem0.") for m in modules),
        "onnxruntime": "onnxruntime" in sys.modules,
    }


async def _live_facts(memory: GraphRAGMemory, user: str, graph: str) -> list[str]:
    listed = await memory.client.list_facts(user, graph)
    return [f.text for f in listed.facts]


async def _settled(check: Any, timeout_s: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = await check()
        if value or time.monotonic() > deadline:
            return value
        await asyncio.sleep(0.1)


async def main(data_dir: str, llm_base_url: str) -> dict[str, Any]:
    overrides: dict[str, Any] = {"data_dir": data_dir, "listen_address": "127.0.0.1:0"}
    if llm_base_url:
        overrides.update(llm_base_url=llm_base_url, llm_model="fake")
    report: dict[str, Any] = {}
    user = f"alice-{uuid.uuid4().hex[:8]}"
    async with (
        MemoryServer(load_settings(overrides=overrides)) as server,
        GraphRAGMemory.connect(f"127.0.0.1:{server.port}") as memory,
    ):
        # 1. The first message on a graph with no facts: short-term memory only.
        first = await memory.begin_turn(user, "Retail", "r-1", "How many vertex types are there?")
        report["first_message"] = {
            "loaded": _loaded(server),
            "recalled": len(first.context.long_term.facts),
        }
        await memory.complete_turn(first, "There are 12 vertex types.")
        if llm_base_url:
            # mem0 is the extraction engine, which runs after the reply: it loads then.
            await _settled(lambda: _now(_loaded(server)["mem0"]))
        report["after_first_reply"] = {"loaded": _loaded(server)}

        # 2. Same conversation: a follow-up only short-term memory can answer.
        asked = await memory.begin_turn(
            user, "Finance", "chat-a", "Which accounts share a device with account 4471?"
        )
        await memory.complete_turn(asked, "Accounts 5120 and 9983 share device D-77 with it.")
        follow_up = await memory.begin_turn(user, "Finance", "chat-a", "Which of them was flagged?")
        report["follow_up"] = {
            "block": follow_up.context_block,
            "recent": [m.content for m in follow_up.context.recent_messages],
        }
        await memory.complete_turn(follow_up, "Account 9983 was flagged in March.")

        # 3. Plant a standing preference: a live fact row for this user and graph.
        planted = await memory.begin_turn(user, "Finance", "chat-a", PLANT)
        await memory.complete_turn(planted, "D'accord, je répondrai en français.")
        report["facts_after_plant"] = await _settled(lambda: _live_facts(memory, user, "Finance"))

        # 4. A new conversation, same user and graph: the preference comes back through
        # long-term memory, and nothing of the planting conversation's short-term memory.
        fresh = await memory.begin_turn(user, "Finance", "chat-b", "Summarize the fraud ring.")
        report["new_conversation"] = {
            "block": fresh.context_block,
            "recent": [m.content for m in fresh.context.recent_messages],
            "summary": fresh.context.summary,
            "facts": [(f.text, f.standing) for f in fresh.context.long_term.facts],
            "degraded": fresh.context.long_term.degraded,
            "loaded": _loaded(server),
        }

        # 5. Never for anyone else: another user on the graph, the user on another graph.
        other_user = await memory.begin_turn(f"bob-{user}", "Finance", "chat-c", "Summarize.")
        other_graph = await memory.begin_turn(user, "Retail", "r-2", "Summarize.")
        report["isolation"] = {
            "other_user": [f.text for f in other_user.context.long_term.facts],
            "other_graph": [f.text for f in other_graph.context.long_term.facts],
        }
    return report


async def _now(value: Any) -> Any:
    return value


if __name__ == "__main__":
    args = sys.argv[1:] + [""]
    print(json.dumps(asyncio.run(main(args[0], args[1]))))
