"""LLMReconciler against the fake OpenAI-compatible endpoint on loopback: small integer ids in the
prompt, mapped back to fact ids; any invalid reply sends the whole batch to the fallback."""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from memory_server.extraction.llm_reconciler import LLMReconciler
from memory_server.memory.facts.model import (
    Candidate,
    Decision,
    FactKind,
    LiveFact,
    ReconciledCandidate,
)
from memory_server.memory.ports import Reconciler

from fake_openai import FakeLLM

PREF, IDEN, GOAL = FactKind.PREFERENCE, FactKind.IDENTITY, FactKind.GOAL
UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def fact(text: str, kind: FactKind = PREF) -> LiveFact:
    return LiveFact(str(uuid.uuid4()), str(uuid.uuid4()), text, kind)


LIVE = [
    fact("Timezone is CET", IDEN),
    fact("Prefers coffee"),
    fact("Likes jazz"),
]
TEA = Candidate("Prefers tea", PREF, change=True)
JAZZ = Candidate("Likes jazz", PREF, retraction=True)
CET = Candidate("Timezone is CET", IDEN)
RUST = Candidate("Is learning Rust", GOAL)
CANDIDATES = [TEA, JAZZ, CET, RUST]


class RecordingFallback:
    """Answers ADD for everything and records each call."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[Candidate], list[LiveFact], Any]] = []

    async def reconcile(
        self,
        candidates: Sequence[Candidate],
        live: Sequence[LiveFact],
        *,
        live_vectors: Mapping[str, Sequence[float]] | None = None,
    ) -> list[ReconciledCandidate]:
        self.calls.append((list(candidates), list(live), live_vectors))
        return [ReconciledCandidate(Decision.ADD, c) for c in candidates]


def decisions(*items: tuple[int, str, Any]) -> str:
    return json.dumps({"decisions": [{"index": i, "event": e, "target": t} for i, e, t in items]})


def reconciler(fake: FakeLLM, fallback: Reconciler, **kwargs: Any) -> LLMReconciler:
    kwargs.setdefault("timeout_s", 5.0)
    return LLMReconciler(fake.base_url, "judge-model", "sk-test", fallback=fallback, **kwargs)


def prompt(fake: FakeLLM) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    user: str = fake.requests[0]["body"]["messages"][1]["content"]
    existing = json.loads(user.split("EXISTING:\n", 1)[1].split("\n\n", 1)[0])
    candidates = json.loads(user.split("CANDIDATES:\n", 1)[1])
    return existing, candidates


async def test_small_ids_map_back_to_fact_ids(fake_llm: FakeLLM) -> None:
    fake_llm.reply = decisions((0, "UPDATE", 2), (1, "DELETE", 3), (2, "NONE", 1), (3, "ADD", None))
    fallback = RecordingFallback()
    vectors = {LIVE[0].version_id: [1.0, 0.0]}
    async with reconciler(fake_llm, fallback) as r:
        typed: Reconciler = r
        result = await typed.reconcile(CANDIDATES, LIVE, live_vectors=vectors)
    assert result == [
        ReconciledCandidate(Decision.UPDATE, TEA, LIVE[1].fact_id),
        ReconciledCandidate(Decision.DELETE, JAZZ, LIVE[2].fact_id),
        ReconciledCandidate(Decision.NONE, CET, LIVE[0].fact_id),
        ReconciledCandidate(Decision.ADD, RUST),
    ]
    assert fallback.calls == []
    [request] = fake_llm.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["Authorization"] == "Bearer sk-test"
    body = request["body"]
    assert body["model"] == "judge-model"
    assert body["response_format"] == {"type": "json_object"}
    existing, candidates = prompt(fake_llm)
    assert existing == [
        {"id": 1, "text": "Timezone is CET", "kind": "identity"},
        {"id": 2, "text": "Prefers coffee", "kind": "preference"},
        {"id": 3, "text": "Likes jazz", "kind": "preference"},
    ]
    assert candidates[0] == {
        "index": 0,
        "text": "Prefers tea",
        "kind": "preference",
        "retraction": False,
        "change": True,
    }
    assert candidates[1]["retraction"] is True
    assert not UUID_RE.search(json.dumps(body))  # never our ids


async def test_decisions_may_come_out_of_order_with_string_ids(fake_llm: FakeLLM) -> None:
    fake_llm.reply = (
        "```json\n"
        + json.dumps(
            {
                "decisions": [
                    {"index": 1, "event": "delete", "target": "3"},
                    {"index": 0, "event": "NONE", "target": None},
                ]
            }
        )
        + "\n```"
    )
    fallback = RecordingFallback()
    async with reconciler(fake_llm, fallback, json_mode=False) as r:
        result = await r.reconcile([TEA, JAZZ], LIVE)
    assert result == [
        ReconciledCandidate(Decision.NONE, TEA),
        ReconciledCandidate(Decision.DELETE, JAZZ, LIVE[2].fact_id),
    ]
    assert fallback.calls == []
    assert "response_format" not in fake_llm.requests[0]["body"]


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (decisions((0, "UPDATE", 9), (1, "DELETE", 3)), "unknown id"),
        (decisions((0, "UPDATE", 0), (1, "DELETE", 3)), "unknown id"),
        (decisions((0, "UPDATE", None), (1, "DELETE", 3)), "UPDATE without a target"),
        (decisions((0, "ADD", None), (1, "DELETE", None)), "DELETE without a target"),
        (decisions((0, "NONE", 7), (1, "NONE", None)), "unknown id"),
        (decisions((0, "ADD", None)), "1 decisions for 2 candidates"),
        (decisions((0, "ADD", None), (1, "NONE", None), (2, "ADD", None)), "3 decisions"),
        (decisions((0, "ADD", None), (0, "NONE", None)), "indexes do not match"),
        (decisions((0, "MERGE", 2), (1, "DELETE", 3)), "unknown event"),
        (decisions((0, "DELETE", 2), (1, "DELETE", 3)), "DELETE for a statement"),
        (decisions((0, "ADD", None), (1, "ADD", None)), "ADD for a retraction"),
        (decisions((0, "UPDATE", 3), (1, "DELETE", 3)), "changed twice"),
        (decisions((0, "UPDATE", True), (1, "DELETE", 3)), "not an integer"),
        ('{"decisions": [{"index": 0, "event": "ADD"', "not JSON"),
        ("I think the first one is new.", "not JSON"),
        ('{"result": "ok"}', "no decisions list"),
    ],
)
async def test_invalid_replies_fall_back_for_the_whole_batch(
    fake_llm: FakeLLM, reply: str, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    fake_llm.reply = reply
    fallback = RecordingFallback()
    vectors = {LIVE[1].version_id: [0.5, 0.5]}
    with caplog.at_level(logging.WARNING):
        async with reconciler(fake_llm, fallback) as r:
            result = await r.reconcile([TEA, JAZZ], LIVE, live_vectors=vectors)
    assert result == [
        ReconciledCandidate(Decision.ADD, TEA),
        ReconciledCandidate(Decision.ADD, JAZZ),
    ]
    assert fallback.calls == [([TEA, JAZZ], LIVE, vectors)]
    assert len(fake_llm.requests) == 1
    [record] = [r for r in caplog.records if r.name.endswith("llm_reconciler")]
    assert reason in record.getMessage()
    for text in ("tea", "jazz", "coffee", "CET"):  # no user text in the log
        assert text not in record.getMessage()


@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        ("status500", "HTTP 500"),
        ("garbage", "response is not JSON"),
        ("empty", "empty content"),
        ("slow", "timed out"),
        ("drip", "timed out"),
    ],
)
async def test_endpoint_failures_fall_back(
    fake_llm: FakeLLM, mode: str, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    fake_llm.mode = mode
    fallback = RecordingFallback()
    with caplog.at_level(logging.WARNING):
        async with reconciler(fake_llm, fallback, timeout_s=0.5) as r:
            started = time.monotonic()
            result = await r.reconcile([TEA], LIVE)
            assert time.monotonic() - started < 2.0
    assert result == [ReconciledCandidate(Decision.ADD, TEA)]
    assert len(fallback.calls) == 1
    assert len(fake_llm.requests) == 1  # no retries
    assert any(reason in r.getMessage() for r in caplog.records)
    # The 500 body echoes the prompt: it must not reach the log.
    assert not any("Prefers" in r.getMessage() for r in caplog.records)


async def test_nothing_to_decide_makes_no_request(fake_llm: FakeLLM) -> None:
    fallback = RecordingFallback()
    async with reconciler(fake_llm, fallback) as r:
        assert await r.reconcile([], LIVE) == []
        assert fallback.calls == []
        # No live facts: the model could only say ADD; the fallback decides, without a call.
        assert await r.reconcile([TEA], []) == [ReconciledCandidate(Decision.ADD, TEA)]
        assert fallback.calls == [([TEA], [], None)]
    assert fake_llm.requests == []


async def test_the_prompt_is_bounded(fake_llm: FakeLLM) -> None:
    live = [fact(f"Likes topic {i} " + "and more words " * 80) for i in range(200)]
    live[150] = fact("Prefers coffee in the morning")
    fake_llm.reply = decisions((0, "UPDATE", 0))  # placeholder, replaced below
    async with reconciler(fake_llm, RecordingFallback(), max_live=50, max_text_chars=120) as r:
        shown = r.shown_facts([TEA], live)
        number = next(n for n, f in shown.items() if f is live[150])
        fake_llm.reply = decisions((0, "UPDATE", number))
        result = await r.reconcile([TEA], live)
    assert result == [ReconciledCandidate(Decision.UPDATE, TEA, live[150].fact_id)]
    existing, _ = prompt(fake_llm)
    assert [e["id"] for e in existing] == list(range(1, 51))
    assert all(len(e["text"]) <= 120 for e in existing)
    assert {"id": number, "text": "Prefers coffee in the morning", "kind": "preference"} in existing
    # In the caller's order: the facts shown keep their relative order.
    positions = [live.index(shown[e["id"]]) for e in existing]
    assert positions == sorted(positions)
    assert not UUID_RE.search(json.dumps(fake_llm.requests[0]["body"]))
