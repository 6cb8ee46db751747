"""bench/mem0_side_by_side.py end to end on a tiny LoCoMo-shaped slice: our server process and
mem0's own Memory (local qdrant + SQLite, our embedder) ingest the same turns and answer the
same questions, and the report's counts, rankings and ratios come from what both did."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

TURNS = [
    ("Alice", "I adopted a grey cat called Pixel from the shelter last week"),
    ("Bob", "Nice, I spent the weekend repairing my sailing boat in Kiel"),
    ("Alice", "My sister Nora is moving to Lisbon to teach chemistry"),
    ("Bob", "I finally finished the marathon in Berlin in under four hours"),
    ("Alice", "We are planning a hiking trip to the Dolomites in September"),
    ("Bob", "My daughter started violin lessons on Tuesdays"),
    ("Alice", "I switched jobs and now work as a data engineer at a bakery chain"),
    ("Bob", "The garden tomatoes got blight, so I planted peppers instead"),
]
QUESTIONS = [
    ("What is the name of Alice's cat?", "D1:1"),
    ("Where did Bob run his marathon?", "D1:4"),
    ("Which instrument does Bob's daughter learn?", "D2:2"),
]


def slice_file(path: Path) -> Path:
    session_1 = [
        {"speaker": s, "dia_id": f"D1:{i + 1}", "text": t} for i, (s, t) in enumerate(TURNS[:4])
    ]
    session_2 = [
        {"speaker": s, "dia_id": f"D2:{i + 1}", "text": t} for i, (s, t) in enumerate(TURNS[4:])
    ]
    sample = {
        "sample_id": "tiny-1",
        "conversation": {
            "speaker_a": "Alice",
            "speaker_b": "Bob",
            "session_1": session_1,
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_2": session_2,
            "session_2_date_time": "2:10 pm on 9 May, 2023",
        },
        "qa": [
            {"question": q, "answer": "-", "evidence": [e], "category": 4} for q, e in QUESTIONS
        ],
    }
    path.write_text(json.dumps([sample]))
    return path


@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.parametrize(("bulk", "rpc"), [(0, "AddFact"), (3, "AddFacts (3 per call)")])
def test_the_side_by_side_bench_measures_both_systems_on_the_same_slice(
    tmp_path: Path, bulk: int, rpc: str
) -> None:
    out = tmp_path / "result.json"
    run = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "mem0_side_by_side.py"),
            "--data",
            str(slice_file(tmp_path / "tiny.json")),
            "--concurrency",
            "4",
            "--warmup",
            "1",
            "--bulk",
            str(bulk),
            "--json-out",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=380,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["facts"] == len(TURNS)
    assert result["ours_ingest"]["facts"] == result["mem0_ingest"]["facts"] == len(TURNS)
    assert result["ours_ingest"]["rpc"] == rpc
    assert result["ours_search"]["calls"] == result["mem0_search"]["calls"] == len(QUESTIONS)
    # Both really searched the stored turns: each question names its evidence's rare words,
    # and with 8 turns and top 10 every turn is returned anyway.
    assert result["ours_recall_at_10"] == 100.0
    assert result["mem0_recall_at_10"] == 100.0
    # As root, the embedded database warns once that it opens its data dir's parents.
    assert [p for p in result["server_problems"] if "chmod o+rx" not in p] == []
    ratios = result["ratios"]
    for key in ("ingest_indexed_vs_mem0", "search_p50_ours_vs_mem0", "search_p95_ours_vs_mem0"):
        assert 0 < ratios[key] < 1000, (key, ratios)
    assert ratios["search_p50_ours_vs_mem0"] == pytest.approx(
        result["ours_search"]["p50_ms"] / result["mem0_search"]["p50_ms"], rel=0.01
    )
    assert "| search p50 ms |" in run.stdout
    # The part of a search neither side skips: one question through the same model.
    assert len(result["question_embedding_p50_ms"]) == 2
    assert all(m > 0 for m in result["question_embedding_p50_ms"])
    assert ratios["third_of_mem0_search_p50_ms"] == pytest.approx(
        result["mem0_search"]["p50_ms"] / 3, abs=0.01
    )
    assert "one question embedded alone, p50:" in run.stdout
