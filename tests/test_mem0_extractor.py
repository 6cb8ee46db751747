"""Mem0Extractor: mem0ai 2.1.0's extraction driven end to end against the fake OpenAI-compatible
endpoint on loopback (the real wire protocol), with mem0's persistence and telemetry off."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from memory_server.extraction.mem0_extractor import (
    INSTRUCTIONS,
    Mem0Extractor,
    fact_kind,
    third_person,
)
from memory_server.memory.errors import Unavailable
from memory_server.memory.facts.model import Candidate, FactKind
from memory_server.memory.ports import Embedder, ExtractionInput, Extractor

from fake_openai import FakeLLM

REPO = Path(__file__).resolve().parents[1]
PREF, DECI, GOAL, IDEN, OTHR = (
    FactKind.PREFERENCE,
    FactKind.DECISION,
    FactKind.GOAL,
    FactKind.IDENTITY,
    FactKind.OTHER,
)


class NoEmbedder:
    """mem0 needs no real vectors here: any embed call is a failure."""

    model_name = "none"
    dimension = 8

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        raise AssertionError("the mem0 extractor must not embed")


def reply(*memories: tuple[str, str]) -> str:
    return json.dumps(
        {
            "memory": [
                {"id": str(i), "text": text, "attributed_to": by, "linked_memory_ids": []}
                for i, (text, by) in enumerate(memories)
            ]
        }
    )


def extractor(fake: FakeLLM, timeout_s: float = 5.0, **kwargs: Any) -> Mem0Extractor:
    return Mem0Extractor(fake.base_url, "tiny-model", "sk-test", NoEmbedder(), timeout_s, **kwargs)


def user_prompt(fake: FakeLLM, n: int = 0) -> str:
    content: str = fake.requests[n]["body"]["messages"][1]["content"]
    return content


def section(prompt: str, title: str) -> str:
    return prompt.split(f"## {title}\n", 1)[1].split("\n\n## ", 1)[0]


async def test_protocol_and_name(fake_llm: FakeLLM) -> None:
    async with extractor(fake_llm) as x:
        typed: Extractor = x
        assert typed.name == "mem0:tiny-model"
        embedder: Embedder = NoEmbedder()
        assert embedder.dimension == 8


async def test_extracts_user_facts_through_mem0(fake_llm: FakeLLM) -> None:
    fake_llm.reply = reply(
        ("User prefers concise bullet points.", "user"),
        ("User's timezone is CET", "user"),
        ("User decided to use TigerGraph for the fraud project", "user"),
        ("User is building a fraud-detection graph", "user"),
        ("User was recommended the book 'Graph Algorithms'", "assistant"),
        ("User was recommended GSQL tutorials", "user"),
        ("User has a dog named Poppy", "user"),
    )
    turn = ExtractionInput(
        "I like bullet points. My timezone is CET. We decided to use TigerGraph. "
        "I'm building a fraud-detection graph. My dog Poppy says hi.",
        "Noted! You might enjoy 'Graph Algorithms'.",
    )
    async with extractor(fake_llm) as x:
        found = await x.extract(turn)
    assert found == [
        Candidate("Prefers concise bullet points", PREF),
        Candidate("Timezone is CET", IDEN),
        Candidate("Decided to use TigerGraph for the fraud project", DECI),
        Candidate("Is building a fraud-detection graph", GOAL),
        Candidate("Has a dog named Poppy", OTHR),
    ]
    [request] = fake_llm.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["Authorization"] == "Bearer sk-test"
    body = request["body"]
    assert body["model"] == "tiny-model"
    assert body["response_format"] == {"type": "json_object"}
    assert body["temperature"] == 0
    system, user = body["messages"]
    from mem0.configs.prompts import ADDITIVE_EXTRACTION_PROMPT

    assert system == {"role": "system", "content": ADDITIVE_EXTRACTION_PROMPT}
    assert user["role"] == "user"
    assert section(user["content"], "New Messages") == (
        f"user: {turn.user_text}\nassistant: {turn.assistant_text}\n"
    )
    assert section(user["content"], "Existing Memories") == "[]"
    assert INSTRUCTIONS in user["content"]


async def test_recalled_facts_are_shown_to_mem0_and_never_returned(fake_llm: FakeLLM) -> None:
    recalled = [f"Likes topic number {i}" for i in range(30)]
    recalled[17] = "Prefers concise bullet points"
    recalled[23] = "Timezone is CET"
    fake_llm.reply = reply(
        ("User prefers concise bullet points", "user"),  # restates recalled[17]
        ("User's timezone is CET.", "user"),  # restates recalled[23]
        ("User prefers answers in French", "user"),
    )
    turn = ExtractionInput(
        "As I said, I prefer concise bullet points and my timezone is CET. "
        "Please answer in French from now on.",
        "",
        recalled=recalled,
    )
    async with extractor(fake_llm) as x:
        found = await x.extract(turn)
    assert found == [Candidate("Prefers answers in French", PREF)]
    existing = json.loads(section(user_prompt(fake_llm), "Existing Memories"))
    # At most ten (mem0 searches with top_k=10), the related ones first, under small ids.
    assert [m["id"] for m in existing] == [str(i) for i in range(10)]
    texts = [m["text"] for m in existing]
    assert texts[:2] == ["Prefers concise bullet points", "Timezone is CET"]
    # No assistant message: mem0 sees only the user's.
    assert section(user_prompt(fake_llm), "New Messages") == f"user: {turn.user_text}\n"


async def test_retractions_and_changes(fake_llm: FakeLLM) -> None:
    fake_llm.reply = reply(
        ("User no longer works at Acme", "user"),
        ("User doesn't drink coffee anymore", "user"),
        ("User used to live in Paris", "user"),
        ("User asked the assistant to forget that they like jazz", "user"),
        ("User now prefers tea", "user"),
    )
    turn = ExtractionInput(
        "I no longer work at Acme. No more coffee for me. I lived in Paris once. "
        "Forget that I like jazz. Actually, I prefer tea now.",
        "",
        recalled=["Works at Acme", "Likes jazz"],
    )
    async with extractor(fake_llm) as x:
        found = await x.extract(turn)
    assert found == [
        Candidate("Works at Acme", IDEN, retraction=True, change=True),
        Candidate("Drinks coffee", OTHR, retraction=True, change=True),
        Candidate("Prefers tea", PREF, change=True),
        # mem0 is additive: the user's own "forget that ..." comes from the rule extractor.
        Candidate("Likes jazz", PREF, retraction=True),
    ]


async def test_nothing_extracted_and_no_user_text(fake_llm: FakeLLM) -> None:
    fake_llm.reply = '{"memory": []}'
    async with extractor(fake_llm) as x:
        assert await x.extract(ExtractionInput("Hi there!", "Hello!")) == []
        assert len(fake_llm.requests) == 1
        assert await x.extract(ExtractionInput("  ", "Hello!")) == []
        assert len(fake_llm.requests) == 1  # no user text: no call


async def test_a_fenced_reply_is_accepted(fake_llm: FakeLLM) -> None:
    fake_llm.reply = "```json\n" + reply(("User speaks Dutch", "user")) + "\n```"
    async with extractor(fake_llm, json_mode=False) as x:
        found = await x.extract(ExtractionInput("I speak Dutch.", ""))
    assert found == [Candidate("Speaks Dutch", IDEN)]
    assert "response_format" not in fake_llm.requests[0]["body"]


async def test_concurrent_extractions_share_nothing(fake_llm: FakeLLM) -> None:
    fake_llm.reply = reply(("User prefers short answers", "user"))
    async with extractor(fake_llm) as x:
        results = await asyncio.gather(
            *(x.extract(ExtractionInput(f"I prefer short answers ({i}).", "")) for i in range(4))
        )
    assert results == [[Candidate("Prefers short answers", PREF)]] * 4
    assert len(fake_llm.requests) == 4
    for n in range(4):  # no call saw another call's memories
        assert section(user_prompt(fake_llm, n), "Existing Memories") == "[]"


@pytest.mark.parametrize(
    ("mode", "reply_text", "reason"),
    [
        ("status500", "", "HTTP 500"),
        ("garbage", "", "response is not JSON"),
        ("empty", "", "empty content"),
        ("ok", "I could not find any memories, sorry.", "reply is not JSON"),
        ("ok", '{"memory": "none"}', "reply is not"),
        ("slow", "", "timed out"),
        ("drip", "", "timed out"),
    ],
)
async def test_llm_failures_raise_unavailable(
    fake_llm: FakeLLM, mode: str, reply_text: str, reason: str
) -> None:
    fake_llm.mode = mode
    fake_llm.reply = reply_text
    secret_words = "I prefer the purple umbrella"
    async with extractor(fake_llm, timeout_s=0.5) as x:
        started = time.monotonic()
        with pytest.raises(Unavailable) as caught:
            await x.extract(ExtractionInput(secret_words, "ok"))
        assert time.monotonic() - started < 2.0
    assert reason in str(caught.value)
    assert "purple" not in str(caught.value)
    assert len(fake_llm.requests) == 1  # no retries


async def test_unreachable_endpoint_raises_unavailable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    x = Mem0Extractor(f"http://127.0.0.1:{port}/v1", "m", None, NoEmbedder(), 2.0)
    async with x:
        with pytest.raises(Unavailable, match="ConnectError"):
            await x.extract(ExtractionInput("I prefer tea.", ""))


@pytest.mark.parametrize(
    ("mem0_text", "ours", "kind"),
    [
        ("User prefers concise bullet points.", "Prefers concise bullet points", PREF),
        ("User wants the assistant to always answer in French", None, PREF),
        ("User likes jazz", "Likes jazz", PREF),
        ("User doesn't like long explanations", None, PREF),
        ("User's favourite database is TigerGraph", "Favourite database is TigerGraph", PREF),
        ("User decided to migrate to Postgres", None, DECI),
        ("User switched to Neovim", None, DECI),
        ("User will use GSQL for all queries", None, DECI),
        ("User is learning Rust", None, GOAL),
        ("User wants to become a data engineer", None, GOAL),
        (
            "User's goal is to ship the fraud model by June",
            "Goal is to ship the fraud model by June",
            GOAL,
        ),
        ("User's name is Marcus", "Name is Marcus", IDEN),
        ("User wants to be called Sam", None, IDEN),
        ("User is a data engineer at Shopify", None, IDEN),
        ("User works at Acme on the platform team", None, IDEN),
        ("User lives in Berlin", None, IDEN),
        ("User's timezone is CET", "Timezone is CET", IDEN),
        ("User has a dog named Poppy", None, OTHR),
        ("Marcus's wife is Elena", "Marcus's wife is Elena", OTHR),
    ],
)
def test_style_and_kind(mem0_text: str, ours: str | None, kind: FactKind) -> None:
    expected = ours if ours is not None else mem0_text.removeprefix("User ")
    expected = expected[:1].upper() + expected[1:]
    assert third_person(mem0_text) == expected
    assert fact_kind(expected) is kind


SCRIPT = """
import asyncio, json, os, sys

from memory_server.extraction.mem0_extractor import Mem0Extractor
from memory_server.memory.ports import ExtractionInput


class Embedder:
    model_name = "none"
    dimension = 4

    async def embed(self, texts):
        raise AssertionError("no embedding")


async def main():
    async with Mem0Extractor(sys.argv[1], "probe-model", "k", Embedder(), 5.0) as x:
        found = await x.extract(ExtractionInput("I prefer tea.", "Noted."))
    import mem0.memory.main as main_module
    import mem0.memory.setup as setup
    import mem0.memory.telemetry as telemetry

    print(json.dumps({
        "found": [c.text for c in found],
        "telemetry": telemetry.MEM0_TELEMETRY,
        "main_telemetry": main_module.MEM0_TELEMETRY,
        "client_posthog": telemetry.client_telemetry.posthog is None,
        "oss_instance": telemetry._oss_telemetry_instance is None,
        "mem0_dir": setup.mem0_dir,
        "mem0_dir_env": os.environ.get("MEM0_DIR"),
    }))


asyncio.run(main())
"""


def test_writes_nothing_and_sends_no_telemetry(fake_llm: FakeLLM, tmp_path: Path) -> None:
    """A fresh interpreter (mem0 reads its settings at import): HOME and TMPDIR are empty
    directories, and the environment points mem0's own OpenAI client elsewhere."""
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    tmp.mkdir()
    qdrant = Path("/tmp/qdrant")
    qdrant_before = qdrant.stat().st_mtime_ns if qdrant.exists() else None
    fake_llm.reply = reply(("User prefers tea", "user"))
    env = {
        **os.environ,
        "HOME": str(home),
        "TMPDIR": str(tmp),
        "OPENROUTER_API_KEY": "sk-or-bogus",
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
        "OPENAI_API_KEY": "sk-bogus",
    }
    env.pop("MEM0_TELEMETRY", None)
    env.pop("MEM0_DIR", None)
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", textwrap.dedent(SCRIPT), fake_llm.base_url],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["found"] == ["Prefers tea"]
    assert report["telemetry"] is False
    assert report["main_telemetry"] is False
    assert report["client_posthog"] is True  # no PostHog client was built
    assert report["oss_instance"] is True
    assert report["mem0_dir"].startswith(str(tmp))  # a throwaway directory ...
    assert report["mem0_dir_env"] is None  # ... set only for the import
    assert list(home.iterdir()) == []  # no ~/.mem0, no history.db
    assert list(tmp.iterdir()) == []  # the throwaway directory is gone after exit
    assert (qdrant.stat().st_mtime_ns if qdrant.exists() else None) == qdrant_before
    [request] = fake_llm.requests  # not OpenRouter, not OPENAI_BASE_URL
    assert request["body"]["model"] == "probe-model"
    assert "posthog" not in done.stderr.lower()


def test_without_mem0_installed_extraction_is_unavailable(tmp_path: Path) -> None:
    script = """
    import asyncio, sys
    sys.modules["mem0"] = None  # as if mem0ai were not installed
    from memory_server.extraction.mem0_extractor import Mem0Extractor
    from memory_server.memory.errors import Unavailable
    from memory_server.memory.ports import ExtractionInput

    class Embedder:
        model_name = "none"
        dimension = 4

    async def main():
        x = Mem0Extractor("http://127.0.0.1:9/v1", "m", None, Embedder(), 1.0)
        try:
            await x.extract(ExtractionInput("I prefer tea.", ""))
        except Unavailable as exc:
            print("unavailable:", exc)
        await x.close()

    asyncio.run(main())
    """
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", textwrap.dedent(script)],
        env={**os.environ, "HOME": str(tmp_path)},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "unavailable: mem0ai is not installed" in done.stdout
