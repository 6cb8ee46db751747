"""The benchmarks' progress line: in place on a terminal, plain lines in a log (no carriage-
return frames in files that are not terminals)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench"
SHOW = (
    "import sys; sys.path.insert(0, sys.argv[1])\n"
    "from locomo_recall import Progress\n"
    "p = Progress('ingest', 50)\n"
    "for _ in range(50): p.step()\n"
)


def test_progress_writes_plain_lines_where_stderr_is_not_a_terminal() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SHOW, str(BENCH)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "\r" not in done.stderr
    lines = done.stderr.splitlines()
    assert lines[0].startswith("ingest") and "0/50" in lines[0]
    assert "50/50" in lines[-1] and len(lines) <= 3
