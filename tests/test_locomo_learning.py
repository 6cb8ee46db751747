"""bench/locomo_learning.py end to end on a tiny LoCoMo-shaped conversation (written here, not
LoCoMo's data): once with the offline rules, once with `llm_base_url` on the project's fake
OpenAI-compatible endpoint (the mem0 path), the benchmark itself unchanged."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from fake_openai import FakeLLM

REPO = Path(__file__).resolve().parent.parent

CONVERSATION: list[dict[str, Any]] = [
    {
        "sample_id": "tiny-1",
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Ben",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ana", "dia_id": "D1:1", "text": "I prefer hiking in the Alps."},
                {"speaker": "Ben", "dia_id": "D1:2", "text": "I live in Lisbon with my sister."},
                {"speaker": "Ana", "dia_id": "D1:3", "text": "Great, say hi to her."},
                {"speaker": "Ben", "dia_id": "D1:4", "text": "Will do, talk soon."},
            ],
        },
        "qa": [
            {
                "question": "What does Ana prefer?",
                "answer": "hiking",
                "evidence": ["D1:1"],
                "category": 4,
            },
            {
                "question": "Where does Ben live?",
                "answer": "Lisbon",
                "evidence": ["D1:2"],
                "category": 4,
            },
            {
                "question": "Is this adversarial?",
                "adversarial_answer": "x",
                "evidence": ["D1:3"],
                "category": 5,
            },
        ],
        "observation": {
            "session_1_observation": {
                "Ana": [["Ana prefers hiking in the Alps.", "D1:1"]],
                "Ben": [["Ben lives in Lisbon with his sister.", "D1:2"]],
            }
        },
    }
]


def _run_bench(tmp_path: Path, *extra: str) -> dict[str, Any]:
    data = tmp_path / "tiny.json"
    data.write_text(json.dumps(CONVERSATION))
    out = tmp_path / "report.json"
    command = [sys.executable, "bench/locomo_learning.py", "--data", str(data)]
    command += ["--json-out", str(out), "--k", "1,10", *extra]
    # A retention pass every second: the turns, dated 2023, stay episodes only because the
    # bench sets a retention that covers them (the server's 365 days would expire them).
    command += ["--server-arg=--retention-interval-seconds=1"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=100)
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(out.read_text())
    assert report["server"]["exit_code"] == 0
    return report


def _check(report: dict[str, Any], extractor_prefix: str) -> None:
    learning = report["learning"]
    # Ana's scope: D1:1 asked, D1:2 answers, D1:3 asked, D1:4 answers; Ben's: D1:1 imported,
    # D1:2 asked, D1:3 answers, D1:4 asked and never answered.
    assert learning["user_turns"] == 4 and learning["turn_pairs"] == 3
    assert learning["leading_replies_imported"] == 1 and learning["unanswered_user_turns"] == 1
    assert learning["learned_turns"] == 3
    assert learning["live_facts"] == 2
    assert all(name.startswith(extractor_prefix) for name in learning["live_facts_by_extractor"])
    recall = report["recall"]["all"]
    assert recall["questions"] == 2  # category 5 is not asked
    assert recall["R@10"] == 100.0 and recall["R@10_se"] == 0.0
    # Facts and episodes each: the two facts' turns, and every turn said as an episode.
    assert report["recall_facts"]["all"]["R@10"] == 100.0
    episodes = report["recall_episodes"]["all"]
    assert (episodes["questions"], episodes["R@1"], episodes["R@10"]) == (2, 100.0, 100.0)
    folds = report["recall_at_10_by_conversation"]
    assert list(folds["recall"].values()) == [100.0]
    observations = report["observations"]
    assert observations["observations"] == 2
    assert observations["matched_at_cosine_0.5_pct"] == 100.0


def test_offline_rules(tmp_path: Path) -> None:
    report = _run_bench(tmp_path)
    _check(report, "rules")
    # Beside it, every turn stored through AddFact: both questions' evidence in the top 10.
    addfact = report["recall_addfact"]["all"]
    assert (addfact["questions"], addfact["R@10"]) == (2, 100.0)


class _Mem0Script:
    """Answers mem0's extraction with the fact the turn states, the reconciler with ADD, and
    anything else (the summarizer) with a line."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, body: dict[str, Any]) -> str:
        system = str(body["messages"][0]["content"])
        prompt = json.dumps(body["messages"][1:])
        if "Memory Extractor" in system:
            self.calls.append("mem0")
            texts = [
                text
                for word, text in (
                    ("hiking", "Prefers hiking in the Alps"),
                    ("Lisbon", "Lives in Lisbon"),
                )
                if word in prompt
            ][:1]
            memory = [
                {"id": str(i), "text": t, "attributed_to": "user", "linked_memory_ids": []}
                for i, t in enumerate(texts)
            ]
            return json.dumps({"memory": memory})
        if "CANDIDATE" in system:
            self.calls.append("reconcile")
            return json.dumps({"decisions": [{"index": 0, "event": "ADD", "target": None}]})
        self.calls.append("other")
        return "A summary."


def test_llm_endpoint_runs_the_same_benchmark(tmp_path: Path, fake_llm: FakeLLM) -> None:
    script = _Mem0Script()
    fake_llm.responder = script
    report = _run_bench(
        tmp_path,
        "--no-addfact",
        f"--server-arg=--llm-base-url={fake_llm.base_url}",
        "--server-arg=--llm-model=fake-model",
        "--server-arg=--llm-api-key=sk-test",
    )
    _check(report, "mem0:fake-model")
    assert script.calls.count("mem0") == 3  # one per learned turn
