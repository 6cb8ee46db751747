"""Summarizers: the offline extractive default and the OpenAI-compatible LLM client."""

from __future__ import annotations

import logging
import random
import re
import socket
import subprocess
import sys
import time
from collections.abc import Sequence

import pytest

from memory_server.llm.summarizer import OpenAICompatibleSummarizer
from memory_server.memory.conversation.summary import ExtractiveSummarizer, marker_text
from memory_server.memory.ports import Summarizer, SummaryTurn
from memory_server.tokens import TiktokenCounter

from fake_openai import FakeLLM

COUNTER = TiktokenCounter()
MARKER_RE = re.compile(r"^\[… (\d+) earlier lines? condensed …\]$")
ROLE_PREFIXES = ("user: ", "assistant: ", "system: ")

VOCAB = re.findall(
    r"\w+",
    "database schema migration latency cache replica index query planner budget deadline "
    "invoice customer ticket deploy rollback cluster region token model prompt vacuum shard "
    "kernel socket buffer thread mutex lease quorum snapshot",
)


def _rich_turn(rnd: random.Random, i: int, role: str) -> SummaryTurn:
    """About 100 tokens; `kw{i}x` is the turn's key phrase, in its first sentence."""
    words = " ".join(rnd.choice(VOCAB) for _ in range(40))
    more = " ".join(rnd.choice(VOCAB) for _ in range(40))
    return SummaryTurn(role, f"Step kw{i}x covers {words}.\nAlso {more}!")


def _fold_conversation(
    summarizer: ExtractiveSummarizer, folds: int, max_tokens: int, seed: int = 1
) -> tuple[list[str], list[SummaryTurn]]:
    """Fold `folds` batches into a rolling summary; return every summary and every turn."""
    rnd = random.Random(seed)
    opening = [
        SummaryTurn(
            "user",
            "Hi there! I want to port the Quetzalcoatl billing engine from Oracle to Postgres "
            "before the audit. Where should I start?",
        ),
        SummaryTurn("assistant", "Sure! Start by inventorying the stored procedures."),
    ]
    summaries: list[str] = []
    turns: list[SummaryTurn] = list(opening)
    summary = summarizer.summarize_sync("", opening, max_tokens)
    summaries.append(summary)
    for k in range(folds):
        batch = [
            _rich_turn(rnd, 2 * k, "user"),
            SummaryTurn("assistant", "Thanks!"),
            _rich_turn(rnd, 2 * k + 1, "assistant"),
        ]
        turns.extend(batch)
        summary = summarizer.summarize_sync(summary, batch, max_tokens)
        summaries.append(summary)
    return summaries, turns


# -- extractive --------------------------------------------------------------------------------


async def test_extractive_name_and_protocol() -> None:
    summarizer: Summarizer = ExtractiveSummarizer(COUNTER)
    assert summarizer.name == "extractive-v1"
    result = await summarizer.summarize("", [SummaryTurn("user", "Plan a trip to Oslo.")], 100)
    assert result == "user: Plan a trip to Oslo."


async def test_extractive_is_deterministic() -> None:
    rnd = random.Random(3)
    turns = [_rich_turn(rnd, i, "user" if i % 2 == 0 else "assistant") for i in range(30)]
    a = await ExtractiveSummarizer(COUNTER).summarize("", turns, 300)
    b = await ExtractiveSummarizer(TiktokenCounter()).summarize("", turns, 300)
    assert a == b
    assert marker_text(1) not in a  # sanity: the comparison is of real content
    assert "kw0x" in a and "kw29x" in a
    rolled_a, _ = _fold_conversation(ExtractiveSummarizer(COUNTER), 40, 250)
    rolled_b, _ = _fold_conversation(ExtractiveSummarizer(COUNTER), 40, 250)
    assert rolled_a == rolled_b


@pytest.mark.parametrize("max_tokens", [0, 1, 2, 3, 5, 8, 13, 20, 50, 100, 400, 1000])
async def test_extractive_respects_the_bound(max_tokens: int) -> None:
    summarizer = ExtractiveSummarizer(COUNTER)
    rnd = random.Random(max_tokens)
    cases: list[tuple[str, list[SummaryTurn]]] = [
        ("", [_rich_turn(rnd, i, "user") for i in range(12)]),
        ("", [SummaryTurn("user", "https://example.com/" + "a1b2c3" * 200)]),
        ("", [SummaryTurn("user", "数据库迁移计划需要在三月之前完成。" * 20)]),
        ("A model wrote this. " * 200, [SummaryTurn("assistant", "Use pg_dump for the move.")]),
        (marker_text(7) + "\n" + marker_text(9), []),
    ]
    for previous, turns in cases:
        result = await summarizer.summarize(previous, turns, max_tokens)
        assert COUNTER.count(result) <= max_tokens, (max_tokens, result)
        if max_tokens == 0:
            assert result == ""
        elif max_tokens >= 3:
            assert result.strip(), (max_tokens, previous[:40], turns)
    # The bound holds on every fold of a rolling summary, too.
    if max_tokens > 0:
        summaries, _ = _fold_conversation(summarizer, 25, max_tokens, seed=max_tokens)
        assert all(COUNTER.count(s) <= max_tokens for s in summaries)
        assert all(s.strip() for s in summaries)
        # Never a bare marker: some content survives even a tiny budget.
        assert all(any(not MARKER_RE.match(ln) for ln in s.splitlines()) for s in summaries)


def test_rolling_keeps_the_opening_and_the_newest_turns() -> None:
    summaries, turns = _fold_conversation(ExtractiveSummarizer(COUNTER), 150, 400)
    final = summaries[-1]
    lines = final.splitlines()
    assert COUNTER.count(final) <= 400
    # The opening: what the user set out to do, as the first line, greeting dropped.
    assert lines[0].startswith("user: I want to port the Quetzalcoatl billing engine")
    # The newest folded turns (2 * 150 - 1 = 299 is the last one).
    assert "kw299x" in lines[-1]
    assert "kw298x" in final
    # The middle is condensed by an explicit, counted marker that only ever grows.
    markers = [int(m.group(1)) for line in lines if (m := MARKER_RE.match(line))]
    assert len(markers) == 1
    content_lines = [line for line in lines if not MARKER_RE.match(line)]
    folded_lines = 2 + 2 * 150  # the thank-yous make no line
    assert markers[0] + len(content_lines) == folded_lines
    counts = [
        int(m.group(1))
        for s in summaries
        for line in s.splitlines()
        if (m := MARKER_RE.match(line))
    ]
    assert counts == sorted(counts) and counts[-1] == markers[0]
    # Every summary along the way kept the opening.
    assert all("Quetzalcoatl" in s for s in summaries)


def test_rolling_summary_copies_only_input_words() -> None:
    summaries, turns = _fold_conversation(ExtractiveSummarizer(COUNTER), 150, 400, seed=11)
    input_words = {w for t in turns for w in re.findall(r"\w+", t.content)}
    for summary in summaries[::10] + summaries[-1:]:
        for line in summary.splitlines():
            if MARKER_RE.match(line):
                continue
            assert line.startswith(ROLE_PREFIXES), line
            content = line.split(": ", 1)[1]
            assert set(re.findall(r"\w+", content)) <= input_words, line
            assert re.fullmatch(r"[\w\s.,!?'…-]+", content), line  # no invented punctuation


async def test_greetings_and_thanks_are_skipped() -> None:
    turns = [
        SummaryTurn("user", "Hi!"),
        SummaryTurn("assistant", "Hello! How can I help you today?"),
        SummaryTurn("user", "Hey there. I need a work visa for Japan. My name is Ana Ruiz."),
        SummaryTurn("assistant", "Sure. You need a certificate of eligibility first."),
        SummaryTurn("user", "ok, thanks!"),
        SummaryTurn("assistant", "You're welcome!"),
        SummaryTurn("user", "Thank you so much."),
    ]
    result = await ExtractiveSummarizer(COUNTER).summarize("", turns, 200)
    assert result.splitlines() == [
        "assistant: How can I help you today?",
        "user: I need a work visa for Japan. My name is Ana Ruiz.",
        "assistant: You need a certificate of eligibility first.",
    ]


async def test_long_messages_are_cut_at_a_word_with_an_ellipsis() -> None:
    words = [f"w{i}" for i in range(500)]
    result = await ExtractiveSummarizer(COUNTER).summarize(
        "", [SummaryTurn("assistant", " ".join(words) + ".")], 400
    )
    assert result.startswith("assistant: w0 w1 w2")
    assert result.endswith(" …")
    kept = result.removeprefix("assistant: ").removesuffix(" …").split(" ")
    assert kept == words[: len(kept)]
    assert 10 < len(kept) < 100


async def test_foreign_previous_summary_is_kept() -> None:
    previous = "The user, Ana, is moving to Osaka in May. She prefers trains over flights."
    result = await ExtractiveSummarizer(COUNTER).summarize(
        previous, [SummaryTurn("user", "Which rail pass should I buy?")], 200
    )
    assert result.splitlines() == [
        "The user, Ana, is moving to Osaka in May.",
        "She prefers trains over flights.",
        "user: Which rail pass should I buy?",
    ]


async def test_adjacent_markers_merge_and_keep_their_counts() -> None:
    previous = "\n".join(["user: Start here.", marker_text(7), marker_text(1), "assistant: Done."])
    result = await ExtractiveSummarizer(COUNTER).summarize(previous, [], 200)
    assert result.splitlines() == ["user: Start here.", marker_text(8), "assistant: Done."]
    assert marker_text(1) == "[… 1 earlier line condensed …]"


def test_domain_summarizer_imports_no_adapters() -> None:
    code = (
        "import sys, memory_server.memory.conversation.summary\n"
        "bad = {'grpc', 'asyncpg', 'httpx'} & {m.split('.')[0] for m in sys.modules}\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env={"PYTHONPATH": ":".join(sys.path)})


# -- LLM ---------------------------------------------------------------------------------------


class RecordingFallback:
    def __init__(self) -> None:
        self.calls: list[tuple[str, list[SummaryTurn], int]] = []

    @property
    def name(self) -> str:
        return "fake-fallback"

    async def summarize(self, previous: str, turns: Sequence[SummaryTurn], max_tokens: int) -> str:
        self.calls.append((previous, list(turns), max_tokens))
        return "FALLBACK SUMMARY"


SECRET = "my passport number is X1234567"
TURNS = [
    SummaryTurn("user", f"Please remember that {SECRET}."),
    SummaryTurn("assistant", "Noted, I will keep it in mind."),
]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def test_llm_sends_a_chat_completion_and_returns_the_reply(fake_llm: FakeLLM) -> None:
    fallback = RecordingFallback()
    async with OpenAICompatibleSummarizer(
        fake_llm.base_url + "/", "tiny-model", "sk-test", COUNTER, fallback
    ) as summarizer:
        assert summarizer.name == "llm:tiny-model"
        result = await summarizer.summarize("User is called Ana.", TURNS, 120)
    assert result == fake_llm.reply
    assert fallback.calls == []
    [request] = fake_llm.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["Authorization"] == "Bearer sk-test"
    assert request["headers"]["Content-Type"] == "application/json"
    body = request["body"]
    assert body["model"] == "tiny-model"
    assert body["temperature"] == 0
    assert body["max_tokens"] == 120
    system, user = body["messages"]
    assert system["role"] == "system"
    for phrase in ("summary", "user", "assistant", "decisions", "open questions", "invent"):
        assert phrase in system["content"]
    assert user["role"] == "user"
    assert "User is called Ana." in user["content"]
    assert f"user: Please remember that {SECRET}." in user["content"]
    assert "assistant: Noted, I will keep it in mind." in user["content"]
    assert user["content"].index("Ana") < user["content"].index(SECRET)


async def test_llm_without_key_sends_no_authorization(fake_llm: FakeLLM) -> None:
    summarizer = OpenAICompatibleSummarizer(
        fake_llm.base_url, "m", None, COUNTER, RecordingFallback()
    )
    try:  # summarize starts the client on first use
        assert await summarizer.summarize("", TURNS, 50) == fake_llm.reply
    finally:
        await summarizer.close()
        await summarizer.close()
    assert "Authorization" not in fake_llm.requests[0]["headers"]


async def test_llm_reply_is_truncated_to_max_tokens(fake_llm: FakeLLM) -> None:
    fake_llm.reply = " ".join(f"fact{i}" for i in range(1000))
    async with OpenAICompatibleSummarizer(
        fake_llm.base_url, "m", "k", COUNTER, RecordingFallback()
    ) as summarizer:
        result = await summarizer.summarize("", TURNS, 40)
    assert 30 <= COUNTER.count(result) <= 40
    assert fake_llm.reply.startswith(result)


@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        ("status500", "HTTP 500"),
        ("garbage", "not JSON"),
        ("empty", "empty content"),
        ("slow", "Timeout"),
        ("drip", "TimeoutError"),
        ("not_listening", "ConnectError"),
    ],
)
async def test_llm_failures_fall_back(
    fake_llm: FakeLLM, mode: str, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    fake_llm.mode = mode
    base_url = f"http://127.0.0.1:{_free_port()}/v1" if mode == "not_listening" else None
    fallback = RecordingFallback()
    caplog.set_level(logging.WARNING, logger="memory_server.llm.summarizer")
    async with OpenAICompatibleSummarizer(
        base_url or fake_llm.base_url, "m", "k", COUNTER, fallback, timeout_s=0.5
    ) as summarizer:
        started = time.monotonic()
        result = await summarizer.summarize("prev", TURNS, 64)
        assert time.monotonic() - started < 3  # the whole call is bounded by timeout_s
    assert result == "FALLBACK SUMMARY"
    assert fallback.calls == [("prev", TURNS, 64)]
    assert len(fake_llm.requests) == (0 if mode == "not_listening" else 1)
    warnings = [r for r in caplog.records if r.name == "memory_server.llm.summarizer"]
    assert [r.levelno for r in warnings] == [logging.WARNING]
    assert "fake-fallback" in warnings[0].getMessage()
    assert reason in warnings[0].getMessage()
    assert SECRET not in caplog.text and "passport" not in caplog.text


async def test_llm_with_no_new_turns_makes_no_request(fake_llm: FakeLLM) -> None:
    async with OpenAICompatibleSummarizer(
        fake_llm.base_url, "m", None, COUNTER, RecordingFallback()
    ) as summarizer:
        previous = "The user is Ana. " * 50
        assert await summarizer.summarize(previous, [], 500) == previous
        short = await summarizer.summarize(previous, [], 8)
        assert previous.startswith(short) and 0 < COUNTER.count(short) <= 8
        assert await summarizer.summarize(previous, TURNS, 0) == ""
    assert fake_llm.requests == []


async def test_llm_close_is_safe_before_start() -> None:
    summarizer = OpenAICompatibleSummarizer(
        "http://127.0.0.1:9/v1", "m", None, COUNTER, RecordingFallback()
    )
    await summarizer.close()
    await summarizer.start()
    await summarizer.start()
    await summarizer.close()
    await summarizer.close()
