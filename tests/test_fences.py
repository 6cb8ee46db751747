"""The house's fences (scripts/fences.py, run by scripts/dev.sh ci) hold on this tree, and each
would catch a breach."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def _fences() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fences", ROOT / "scripts" / "fences.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["fences"] = module
    spec.loader.exec_module(module)
    return module


fences = _fences()


def test_the_tree_is_inside_its_fences() -> None:
    assert fences.main() == 0


def test_a_bench_reaching_into_private_code_is_caught(tmp_path: Path) -> None:
    bench = tmp_path / "bench_x.py"
    bench.write_text(
        "import memory_server.store.facts._reads as reads\n"
        "from memory_server.index.pgvector import _TABLE\n"
        "from memory_client._retry import never\n"
        "from memory_server.memory.recall.search import CANDIDATES_PER_SIGNAL\n"
        "index._ready = True\n"
        "self._mine = 1\n"
    )
    found = list(fences.private_uses(bench))
    assert len(found) == 4, found
    assert "imports private memory_server.store.facts._reads" in found[0]
    assert any("._ready" in line for line in found)


def test_a_long_module_and_a_crowded_folder_are_caught(tmp_path: Path, monkeypatch) -> None:
    package = tmp_path / "memory_server"
    package.mkdir()
    (package / "long.py").write_text("x = 1\n" * (fences.MAX_MODULE_LINES + 1))
    for i in range(fences.MAX_MODULES_PER_FOLDER):
        (package / f"m{i}.py").write_text("")
    monkeypatch.setattr(fences, "ROOT", tmp_path)
    monkeypatch.setattr(fences, "PRODUCT", (package,))
    assert [line.split(":")[0] for line in fences.long_modules()] == ["memory_server/long.py"]
    assert [line.split(":")[0] for line in fences.crowded_folders()] == ["memory_server/"]
