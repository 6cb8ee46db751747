"""GraphRAG's checkout and the Python environment its backend runs in.

- The checkout comes from `MEMORY_GRAPHRAG_SRC` and must be tigergraph/graphrag at cc4eed1: a
  git checkout is asked for its HEAD; a tree without `.git` (a `git archive` export) must carry
  a marker file `.graphrag-commit` whose first line is the commit, e.g.
  `git -C <mirror> rev-parse cc4eed1 > <export>/.graphrag-commit`.
- The environment is what graphrag/Dockerfile builds (`pip install -r common/requirements.txt`,
  exact pins, Python 3.11), cached under `MEMORY_GRAPHRAG_VENV` (default
  /tmp/graphrag-memory-graphrag-venv) in a folder named by the requirements file's hash. It is
  built in the background (`start_build`), logged to `install.log` there, and `freeze.txt`
  records what it holds; `.ready` marks a finished build.
- Our client then goes in as an operator adds it: `pip install <repo>/clients[graphrag]` (a
  real build of the graphrag-memory-client distribution); GraphRAG's pins must be what they
  were (`changed_pins`).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

GRAPHRAG_COMMIT = "cc4eed1d3ae7240b7138293ec90aaec73e944ee2"
SRC_ENV = "MEMORY_GRAPHRAG_SRC"
VENV_ENV = "MEMORY_GRAPHRAG_VENV"
DEFAULT_VENV_ROOT = "/tmp/graphrag-memory-graphrag-venv"
MARKER = ".graphrag-commit"
REPO = Path(__file__).resolve().parents[2]
CLIENTS = REPO / "clients"
REQUIREMENTS = Path("common/requirements.txt")


def source_problem(src: Path) -> str | None:
    """Why `src` is not a usable checkout of GraphRAG at cc4eed1 (None when it is)."""
    for needed in (REQUIREMENTS, Path("graphrag/app/main.py"), Path("graphrag/Dockerfile")):
        if not (src / needed).is_file():
            return f"{src} has no {needed}: not a tigergraph/graphrag checkout"
    if (src / ".git").exists():
        head = subprocess.run(
            ["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        found, how = head, "git HEAD"
    elif (src / MARKER).is_file():
        lines = (src / MARKER).read_text().split()
        found, how = (lines[0] if lines else ""), MARKER
    else:
        return f"{src} is no git checkout and has no {MARKER} marker naming its commit"
    if len(found) < 7 or not GRAPHRAG_COMMIT.startswith(found.lower()):
        return f"{src} is at {found or 'an unknown commit'} ({how}), not {GRAPHRAG_COMMIT[:7]}"
    return None


def requirements_key(src: Path) -> str:
    return hashlib.sha256((src / REQUIREMENTS).read_bytes()).hexdigest()[:16]


def venv_root(src: Path) -> Path:
    return Path(os.environ.get(VENV_ENV) or DEFAULT_VENV_ROOT) / f"py311-{requirements_key(src)}"


def pins(src: Path) -> dict[str, str]:
    """GraphRAG's exact pins, by normalized distribution name."""
    out = {}
    for line in (src / REQUIREMENTS).read_text().splitlines():
        m = re.match(r"\s*([A-Za-z0-9_.\-]+)\s*==\s*([^\s;#]+)", line)
        if m:
            out[_norm(m[1])] = m[2]
    return out


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def frozen(python: Path) -> dict[str, str]:
    text = subprocess.run(
        [str(python), "-m", "pip", "freeze", "--all"], capture_output=True, text=True, check=True
    ).stdout
    return {_norm(n): v for n, _, v in (line.partition("==") for line in text.splitlines()) if v}


def changed_pins(src: Path, python: Path) -> dict[str, tuple[str, str]]:
    """GraphRAG's pins the environment no longer holds: name -> (pinned, installed)."""
    now = frozen(python)
    return {n: (v, now.get(n, "missing")) for n, v in pins(src).items() if now.get(n) != v}


_BUILD = r"""
set -euo pipefail
exec 9>"$ROOT/.lock"
flock 9
if [ -f "$ROOT/.ready" ]; then echo "cached: $ROOT"; exit 0; fi
echo "building GraphRAG's environment in $ROOT ($(date -u +%FT%TZ))"
[ -x "$ROOT/venv/bin/python" ] || "$PY311" -m venv "$ROOT/venv"
"$ROOT/venv/bin/python" -m pip install --disable-pip-version-check -r "$REQS"
"$ROOT/venv/bin/python" -m pip freeze --all > "$ROOT/freeze.txt"
touch "$ROOT/.ready"
echo "done ($(date -u +%FT%TZ))"
"""


@dataclass
class VenvBuild:
    """GraphRAG's environment being built (or found built) in the background."""

    src: Path
    root: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def python(self) -> Path:
        return self.root / "venv" / "bin" / "python"

    @property
    def log(self) -> Path:
        return self.root / "install.log"

    def wait(self, timeout_s: float) -> None:
        if self.process is not None:
            code = self.process.wait(timeout_s)
            self.process = None
            if code != 0:
                tail = self.log.read_text(errors="replace")[-4000:]
                raise RuntimeError(f"GraphRAG's environment did not build ({code}):\n{tail}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self.process = None


def start_build(src: Path) -> VenvBuild:
    root = venv_root(src)
    root.mkdir(parents=True, exist_ok=True)
    build = VenvBuild(src, root)
    py311 = shutil.which("python3.11")
    if py311 is None:
        raise RuntimeError("python3.11 is not on PATH (GraphRAG's Dockerfile uses 3.11)")
    env = {**os.environ, "ROOT": str(root), "PY311": py311, "REQS": str(src / REQUIREMENTS)}
    with build.log.open("ab") as log:
        build.process = subprocess.Popen(
            ["bash", "-c", _BUILD], env=env, stdout=log, stderr=subprocess.STDOUT
        )
    return build


def install_client(build: VenvBuild) -> str:
    """Installs `clients[graphrag]` into GraphRAG's environment; returns the command. Built
    from a copy of clients/, so the build leaves nothing (build/, *.egg-info) in the tree."""
    with tempfile.TemporaryDirectory(prefix="graphrag-memory-client-") as tmp:
        source = Path(tmp) / "clients"
        shutil.copytree(
            CLIENTS, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__")
        )
        with build.log.open("ab") as log:
            subprocess.run(
                [str(build.python), "-m", "pip", "install", f"{source}[graphrag]"],
                stdout=log,
                stderr=subprocess.STDOUT,
                check=True,
            )
    return f"pip install {CLIENTS}[graphrag] (built from a copy)"
