"""The token counter reads tiktoken's BPE file from the wheel and leaves no copy of it behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

COUNT = (
    "from memory_server.tokens import TiktokenCounter; import os; "
    "print(TiktokenCounter().count('hello world'), 'TIKTOKEN_CACHE_DIR' in os.environ)"
)


def _count_in(tmp: Path, **extra: str) -> list[str]:
    cache = ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR")
    env = {k: v for k, v in os.environ.items() if k not in cache}
    env.update(TMPDIR=str(tmp), **extra)
    return subprocess.run(
        [sys.executable, "-c", COUNT], env=env, check=True, capture_output=True, text=True
    ).stdout.split()


def test_loading_the_encoding_writes_nothing_to_the_temporary_folder(tmp_path: Path) -> None:
    # tiktoken's default would copy the 1.7 MB file to $TMPDIR/data-gym-cache/<sha1 of its path>.
    assert _count_in(tmp_path) == ["2", "False"]  # and the process environment is as it was
    assert list(tmp_path.iterdir()) == []


def test_a_cache_folder_the_operator_names_is_still_used(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    assert _count_in(tmp_path, TIKTOKEN_CACHE_DIR=str(cache)) == ["2", "True"]
    assert len(list(cache.iterdir())) == 1
