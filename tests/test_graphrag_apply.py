"""graphrag-memory-integrate: the edits go in whole or not at all, twice is once, and revert
gives back the bytes. On a tree made of the very pieces of GraphRAG's code the edits look for;
tests/test_graphrag_run.py applies them to GraphRAG's real checkout (opt-in)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from memory_client.graphrag.integration.apply import apply_integration, integration_status, main
from memory_client.graphrag.integration.edits import EDITS


def _tree(root: Path, skip: int | None = None) -> dict[Path, str]:
    texts: dict[Path, list[str]] = {}
    for i, edit in enumerate(EDITS):
        parts = texts.setdefault(root / edit.path, ["# GraphRAG's code\n"])
        if i == skip:
            continue
        for n in range(edit.count):
            parts.append(edit.old)
            parts.append(f"\n# more of GraphRAG's code {i}.{n}\n")
    written = {}
    for path, parts in texts.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(parts))
        written[path] = path.read_text()
    return written


def test_apply_is_whole_idempotent_and_reverts_to_the_bytes(tmp_path: Path) -> None:
    before = _tree(tmp_path)
    assert not integration_status(tmp_path)
    diff = apply_integration(tmp_path)
    assert integration_status(tmp_path)
    assert sum(line.startswith("+++ ") for line in diff.splitlines()) == 4
    for edit in EDITS:
        assert (tmp_path / edit.path).read_text().count(edit.new) == edit.count
    assert apply_integration(tmp_path) == ""  # twice is once
    apply_integration(tmp_path, revert=True)
    assert {p: p.read_text() for p in before} == before
    assert apply_integration(tmp_path, revert=True) == ""


def test_a_checkout_the_edits_do_not_fit_is_left_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = next(i for i, e in enumerate(EDITS) if e.path.endswith("connections.py"))
    before = _tree(tmp_path, skip=missing)
    assert main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "common/db/connections.py" in err and "found 0" in err
    assert {p: p.read_text() for p in before} == before  # not even the files that did fit
    assert main([str(tmp_path / "nowhere")]) == 2


def test_the_command_line(tmp_path: Path) -> None:
    _tree(tmp_path)
    run = [sys.executable, "-m", "memory_client.graphrag.integration.apply"]

    def out(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*run, *args], capture_output=True, text=True, timeout=60)

    assert out("--check", str(tmp_path)).returncode == 1
    diff = out("--diff", str(tmp_path))
    assert diff.returncode == 0 and "+        context = answer_context(context)" in diff.stdout
    assert out("--check", str(tmp_path)).returncode == 1  # --diff wrote nothing
    applied = out(str(tmp_path))
    assert applied.returncode == 0 and "4 file(s) changed" in applied.stdout
    assert out("--check", str(tmp_path)).returncode == 0
