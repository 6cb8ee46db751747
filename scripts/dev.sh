#!/usr/bin/env bash
# Chores: gen | check-gen | lint | test | fuzz | lock | deploy-check | ci. Expects the dev install in
# .venv (python3 -m venv .venv &&
#   .venv/bin/pip install -c requirements/constraints.txt -e ./clients -e '.[dev]').
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PY="$VENV/bin/python"
# The newest Kubernetes schema kubernetes-validate 1.37.0 bundles.
K8S_VERSION=1.37.0

case "${1:-}" in
  gen)
    "$PY" scripts/gen_protos.py
    ;;
  check-gen)
    "$PY" scripts/gen_protos.py
    if ! git diff --quiet -- clients/ || [ -n "$(git ls-files --others --exclude-standard clients/)" ]; then
      git --no-pager diff --stat -- clients/
      echo "generated stubs differ from protos/: run scripts/dev.sh gen and commit" >&2
      exit 1
    fi
    ;;
  lint)
    "$VENV/bin/ruff" check .
    "$VENV/bin/ruff" format --check .
    "$VENV/bin/mypy"
    # The benchmarks and scripts are clients of the product: the same strict types.
    "$VENV/bin/mypy" bench scripts
    ;;
  test)
    shift
    "$VENV/bin/pytest" "$@"
    ;;
  lock)
    # requirements/server.txt: what a plain `pip install ./clients .` puts in a fresh venv, the
    # project's own two distributions left out (the image installs them from the tree), pinned,
    # with the sha256 of each wheel, for the image's `pip install --require-hashes`. Needs the
    # package index; run it after changing [project] dependencies and commit the result.
    # pip picks wheels for the machine it runs on, so lock on the image's platform: Linux x86_64,
    # CPython 3.11, glibc no newer than bookworm's 2.36.
    "$PY" -c 'import platform as p, sys; v = p.libc_ver(); sys.exit(not (
        p.system() == "Linux" and p.machine() == "x86_64" and sys.version_info[:2] == (3, 11)
        and v[0] == "glibc" and tuple(map(int, v[1].split("."))) <= (2, 36)))' \
      || { echo "lock: run on Linux x86_64, CPython 3.11, glibc <= 2.36 (the image's)" >&2; exit 1; }
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    # The same inputs as the image's build stage, copied so the build leaves nothing here.
    mkdir "$work/src"
    cp -R pyproject.toml README.md server clients "$work/src/"
    "$PY" -m venv "$work/venv"
    "$work/venv/bin/pip" install --quiet "$work/src/clients" "$work/src"
    "$work/venv/bin/pip" freeze --exclude graphrag-memory --exclude graphrag-memory-client \
      >"$work/freeze.txt"
    "$work/venv/bin/pip" download --quiet --no-deps --only-binary=:all: \
      -r "$work/freeze.txt" -d "$work/wheels"
    "$PY" - "$work/freeze.txt" "$work/wheels" requirements/server.txt <<'EOF'
import hashlib
import re
import sys
from pathlib import Path

freeze, wheels, out = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


by_name: dict[str, list[Path]] = {}
for wheel in sorted(wheels.glob("*.whl")):
    by_name.setdefault(norm(wheel.name.split("-")[0]), []).append(wheel)
lines = [
    "# Runtime dependencies of a plain `pip install .` (graphrag-memory itself excluded), every",
    "# distribution pinned, with the sha256 of the wheel the image installs (CPython 3.11,",
    "# linux x86_64): the Dockerfile runs pip install --no-deps --require-hashes -r on it.",
    "# Generated; do not edit. Regenerate with `scripts/dev.sh lock` (a fresh venv, pip install .,",
    "# pip freeze --exclude graphrag-memory, pip download --no-deps --only-binary=:all:, sha256).",
]
for requirement in freeze.read_text().split():
    name = requirement.split("==")[0]
    found = by_name.get(norm(name))
    if "==" not in requirement or not found:
        sys.exit(f"lock: no pinned wheel for {requirement!r}")
    hashes = [hashlib.sha256(wheel.read_bytes()).hexdigest() for wheel in found]
    lines.append(" \\\n".join([requirement, *(f"    --hash=sha256:{h}" for h in hashes)]))
out.parent.mkdir(exist_ok=True)
out.write_text("\n".join(lines) + "\n")
print(f"lock: wrote {out} ({len(lines) - 5} distributions)")
# The same pins without hashes, for `pip install -c` beside the editable installs (a hashed
# constraints file would put pip in hash-checking mode, which editable installs cannot pass).
pins = [
    "# The pins of requirements/server.txt without their hashes: the README's install commands",
    "# use it as pip constraints, so the tests run the runtime packages the image ships.",
    "# Generated with server.txt; do not edit. Regenerate with `scripts/dev.sh lock`.",
    *freeze.read_text().split(),
]
constraints = out.with_name("constraints.txt")
constraints.write_text("\n".join(pins) + "\n")
print(f"lock: wrote {constraints}")
EOF
    ;;
  fuzz)
    # The long fuzz run: fuzz [EXAMPLES per RPC, default 1000] [SEED, default 20261201].
    # Writes counts by status and method to fuzz-report.json (tests/test_fuzz.py).
    MEMORY_FUZZ_EXAMPLES="${2:-1000}" MEMORY_FUZZ_REPORT="${MEMORY_FUZZ_REPORT:-fuzz-report.json}" \
      "$VENV/bin/pytest" tests/test_fuzz.py -p no:cacheprovider -o timeout=3600 \
      --hypothesis-seed="${3:-20261201}"
    ;;
  deploy-check)
    # The Dockerfile, the Kubernetes manifests and compose.yaml against their linters and
    # schemas, offline (tests/test_deploy.py adds the invariants a schema can't express).
    "$VENV/bin/hadolint" Dockerfile
    "$VENV/bin/kubernetes-validate" --strict --kubernetes-version "$K8S_VERSION" --quiet k8s/*.yaml
    "$VENV/bin/check-jsonschema" --builtin-schema vendor.compose-spec compose.yaml
    ;;
  ci)
    "$0" check-gen
    "$0" lint
    # The house's fences: module and folder sizes, no bench use of private product code.
    "$PY" scripts/fences.py
    "$0" deploy-check
    ;;
  *)
    echo "usage: scripts/dev.sh gen|check-gen|lint|test [pytest args]|fuzz [examples] [seed]|lock|deploy-check|ci" >&2
    exit 2
    ;;
esac
