"""bench/lexical_ab.py on a tiny seed: the base revision's lexical statement and the working
tree's answer the same questions with the same hits (HEAD against itself when nothing changed,
or against the change being measured)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_lexical_ab_bench_compares_two_revisions_on_one_database() -> None:
    run = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "lexical_ab.py"),
            "--base",
            "HEAD",
            "--sizes",
            "60",
            "--many-scopes",
            "3",
            "--many-facts",
            "5",
            "--queries",
            "4",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    table = [line for line in run.stdout.splitlines() if line.startswith("| 1 × 60 |")]
    assert len(table) == 1
    assert table[0].endswith("| 4/4 |")
    assert "| 3 × 5 (one) |" in run.stdout
