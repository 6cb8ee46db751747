"""Long-term memory with an LLM configured: mem0 extracts, one LLM call reconciles, and an
outage of the endpoint falls back to the offline rules. The endpoint is a fake that speaks the
OpenAI wire protocol on loopback."""

from __future__ import annotations

import json
from typing import Any

import pytest

from memory_client.v1 import memory_pb2 as pb

from conftest import RunningServer, ServerFactory, new_id
from fake_openai import FakeLLM


class ScriptedLLM:
    """Answers as mem0's extractor, our reconciler or the summarizer would be answered."""

    def __init__(self) -> None:
        self.memories: list[str] = []
        self.decisions: list[dict[str, Any]] = []
        self.calls: list[str] = []

    def __call__(self, body: dict[str, Any]) -> str:
        system = str(body["messages"][0]["content"])
        if "Memory Extractor" in system:
            self.calls.append("mem0")
            return json.dumps(
                {
                    "memory": [
                        {
                            "id": str(i),
                            "text": text,
                            "attributed_to": "user",
                            "linked_memory_ids": [],
                        }
                        for i, text in enumerate(self.memories)
                    ]
                }
            )
        if "CANDIDATE" in system:
            self.calls.append("reconcile")
            return json.dumps({"decisions": self.decisions})
        self.calls.append("other")
        return "A summary."


@pytest.fixture
async def llm_memory(
    start_server: ServerFactory, fake_llm: FakeLLM
) -> tuple[RunningServer, ScriptedLLM]:
    script = ScriptedLLM()
    fake_llm.responder = script
    server = await start_server(
        fact_extract_async=False,
        llm_base_url=fake_llm.base_url,
        llm_model="extractor-test",
        llm_api_key="sk-test",
    )
    return server, script


async def _turn(memory: RunningServer, scope: dict[str, str], text: str) -> None:
    conversation = new_id()
    started = await memory.stub.StartTurn(
        pb.StartTurnRequest(**scope, conversation_id=conversation, content=text)
    )
    await memory.stub.CompleteTurn(
        pb.CompleteTurnRequest(
            **scope,
            conversation_id=conversation,
            content="Noted.",
            parent_id=started.message.message_id,
        )
    )


async def _live(memory: RunningServer, scope: dict[str, str]) -> list[pb.Fact]:
    return list((await memory.stub.ListFacts(pb.ListFactsRequest(**scope))).facts)


async def test_mem0_extracts_and_the_llm_reconciles(
    llm_memory: tuple[RunningServer, ScriptedLLM], scope: dict[str, str]
):
    memory, script = llm_memory
    script.memories = ["User prefers answers in French"]
    await _turn(memory, scope, "Please answer in French from now on.")
    [fact] = await _live(memory, scope)
    assert fact.text == "Prefers answers in French"
    assert fact.extractor == "mem0:extractor-test"
    assert script.calls == ["mem0"]  # nothing to reconcile against: no reconciliation call

    script.memories = ["User prefers answers in English"]
    script.decisions = [{"index": 0, "event": "UPDATE", "target": 1}]
    await _turn(memory, scope, "Actually, English is better for me now.")
    [after] = await _live(memory, scope)
    assert (after.fact_id, after.text) == (fact.fact_id, "Prefers answers in English")
    assert script.calls[-2:] == ["mem0", "reconcile"]


async def test_an_llm_outage_falls_back_to_the_rules(
    llm_memory: tuple[RunningServer, ScriptedLLM], scope: dict[str, str], fake_llm: FakeLLM
):
    memory, _ = llm_memory
    fake_llm.mode = "status500"
    await _turn(memory, scope, "I prefer concise bullet points.")
    [fact] = await _live(memory, scope)
    assert fact.text == "Prefers concise bullet points"
    assert fact.extractor == "rules-v1"
