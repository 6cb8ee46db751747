"""bench/embed_padding.py end to end on a tiny LoCoMo-shaped slice: every mode embeds every
text, and the report's figures come from those runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from test_mem0_side_by_side import TURNS, slice_file

ROOT = Path(__file__).resolve().parents[1]


def test_the_padding_bench_runs_every_mode_on_both_sets(tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    run = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "embed_padding.py"),
            "--data",
            str(slice_file(tmp_path / "tiny.json")),
            "--texts",
            "8",
            "--batch",
            "4",
            "--budgets",
            "16,64",
            "--rounds",
            "2",
            "--json-out",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads(out.read_text())
    turns = result["sets"]["locomo turns"]
    assert turns["tokens_max"] >= turns["tokens_mean"] > 5
    modes = [row["mode"] for row in turns["rows"]]
    assert modes == [
        "one text per call",
        "batches of 4, padded",
        "batches of 4, sub-batches ≤ 16 tokens",
        "batches of 4, sub-batches ≤ 64 tokens",
    ]
    for data in result["sets"].values():
        for row in data["rows"]:
            assert len(row["rounds"]) == 2 and min(row["rounds"]) > 0
        assert data["rows"][1]["vs_padded"] == 1.0
    assert len(TURNS) == 8  # the slice holds the 8 turns the bench was asked for
    assert "| one text per call |" in run.stdout
