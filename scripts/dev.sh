#!/usr/bin/env bash
# Chores: gen | check-gen | lint | test | ci. Expects the dev install in .venv
# (python3 -m venv .venv && .venv/bin/pip install -e '.[dev]').
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PY="$VENV/bin/python"

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
    ;;
  test)
    shift
    "$VENV/bin/pytest" "$@"
    ;;
  ci)
    "$0" check-gen
    "$0" lint
    ;;
  *)
    echo "usage: scripts/dev.sh gen|check-gen|lint|test [pytest args]|ci" >&2
    exit 2
    ;;
esac
