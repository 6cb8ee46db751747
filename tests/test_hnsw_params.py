"""bench/hnsw_params.py on a tiny seed: exact top-10s first, then each build at each
ef_search, with recall measured against the exact answers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_hnsw_bench_measures_each_build_against_exact() -> None:
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "hnsw_params.py"), "--builds", "8:16",
         "--ef", "10,40", "--sizes", "30,120", "--many-scopes", "2", "--many-facts", "5",
         "--questions", "4"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    rows = [line.split(" | ") for line in run.stdout.splitlines() if line.startswith("| m 8,")]
    assert [(r[2], r[3]) for r in rows] == [
        ("10", "one-30"), ("10", "one-120"), ("40", "one-30"), ("40", "one-120")
    ]  # fmt: skip
    assert all(0.0 <= float(r[4]) <= 1.0 for r in rows)
    assert "| exact |  |  | one-120 |" in run.stdout
