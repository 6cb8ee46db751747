"""Follow-up questions for a search (setting ltm_split_questions, memory.recall.split): a model
on an OpenAI-compatible endpoint (the loopback stand-in) sees the question and the first hits
and writes the questions that find the rest; their hits rank beside the question's. A failed
or wrong answer searches as asked; no secret leaves in the question."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from memory_client.v1 import memory_pb2 as pb
from memory_server.extraction.llm_questions import LLMQuestionSplitter
from memory_server.extraction.secrets import DetectSecretsFilter

from conftest import RunningServer, ServerFactory
from fake_openai import FakeLLM

FACTS = [
    "Manager is Priya Raman",
    "Priya Raman is saving up for a month in Kyoto next spring",
    "Travels to Berlin every autumn for a graph conference",
    "Wants a vacation somewhere warm this winter",
    "Prefers concise bullet points",
    "Works in the fraud team",
]
QUESTION = "Where does my manager want to travel?"
FOLLOW_UP = "Where does Priya Raman want to travel?"
TARGET = "Priya Raman is saving up for a month in Kyoto next spring"


def _splitting(fake_llm: FakeLLM, questions: list[str]) -> None:
    def respond(body: dict[str, Any]) -> str:
        return json.dumps({"questions": questions})

    fake_llm.responder = respond


async def _server(
    start_server: ServerFactory, fake_llm: FakeLLM, *, split: bool = True
) -> RunningServer:
    return await start_server(
        fact_extract_async=False,
        llm_base_url=fake_llm.base_url,
        llm_model="splitter-test",
        ltm_split_questions=split,
    )


async def _top(memory: RunningServer, scope: dict[str, str], query: str, k: int) -> list[str]:
    for text in FACTS:
        await memory.stub.AddFact(pb.AddFactRequest(**scope, text=text))
    found = await memory.stub.SearchFacts(
        pb.SearchFactsRequest(**scope, query=query, top_k=k, threshold=0)
    )
    return [r.fact.text for r in found.results]


def _asked(fake_llm: FakeLLM) -> list[dict[str, Any]]:
    """The splitter's requests: the user message of each, as JSON."""
    return [
        json.loads(r["body"]["messages"][-1]["content"])
        for r in fake_llm.requests
        if "follow-up questions" in r["body"]["messages"][0]["content"]
    ]


async def test_a_follow_up_finds_what_the_question_alone_does_not(
    start_server: ServerFactory, scope: dict[str, str], fake_llm: FakeLLM
) -> None:
    _splitting(fake_llm, [FOLLOW_UP])
    memory = await _server(start_server, fake_llm)
    top = await _top(memory, scope, QUESTION, 2)
    assert TARGET in top
    [asked] = _asked(fake_llm)
    assert asked["QUESTION"] == QUESTION
    assert "Manager is Priya Raman" in asked["FACTS"]  # the first hits are the context


async def test_without_the_setting_the_question_alone_misses_it(
    start_server: ServerFactory, scope: dict[str, str], fake_llm: FakeLLM
) -> None:
    _splitting(fake_llm, [FOLLOW_UP])
    memory = await _server(start_server, fake_llm, split=False)
    assert TARGET not in await _top(memory, scope, QUESTION, 2)
    assert _asked(fake_llm) == []


@pytest.mark.parametrize("mode", ["status500", "garbage"])
async def test_a_failed_model_searches_as_asked(
    start_server: ServerFactory,
    scope: dict[str, str],
    fake_llm: FakeLLM,
    caplog: pytest.LogCaptureFixture,
    mode: str,
) -> None:
    fake_llm.mode = mode
    memory = await _server(start_server, fake_llm)
    caplog.set_level(logging.WARNING)
    top = await _top(memory, scope, QUESTION, 2)
    assert top and TARGET not in top  # what the question alone finds
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "searching as asked" in logged and "manager" not in logged


@pytest.mark.parametrize(
    "reply",
    [
        "not json",
        json.dumps({"questions": "Where?"}),
        json.dumps({"questions": ["a", "b", "c", "d"]}),
        json.dumps({"questions": ["", "Who?"]}),
        json.dumps(["Who is Priya?"]),
    ],
)
async def test_a_wrong_answer_gives_no_follow_ups(fake_llm: FakeLLM, reply: str) -> None:
    fake_llm.reply = reply
    splitter = LLMQuestionSplitter(fake_llm.base_url, "m", None, 5.0, DetectSecretsFilter())
    try:
        assert await splitter.split(QUESTION, ["Manager is Priya Raman"]) == []
    finally:
        await splitter.close()


async def test_the_question_is_asked_again_only_once_and_never_as_itself(
    fake_llm: FakeLLM,
) -> None:
    fake_llm.reply = json.dumps({"questions": [QUESTION, FOLLOW_UP, FOLLOW_UP]})
    splitter = LLMQuestionSplitter(fake_llm.base_url, "m", None, 5.0, DetectSecretsFilter())
    try:
        assert await splitter.split(QUESTION) == [FOLLOW_UP]
    finally:
        await splitter.close()


async def test_no_secret_leaves_in_the_question(fake_llm: FakeLLM) -> None:
    key = "sk-proj-" + "Zq8" * 16
    fake_llm.reply = json.dumps({"questions": []})
    splitter = LLMQuestionSplitter(fake_llm.base_url, "m", None, 5.0, DetectSecretsFilter())
    try:
        assert await splitter.split(f"Which project uses the key {key}?") == []
    finally:
        await splitter.close()
    sent = json.dumps([r["body"] for r in fake_llm.requests])
    assert key not in sent and "[redacted" in sent
