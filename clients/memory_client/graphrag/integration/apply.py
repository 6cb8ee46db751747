"""`graphrag-memory-integrate`: applies the memory integration to a GraphRAG checkout.

    graphrag-memory-integrate /path/to/graphrag            apply (idempotent)
    graphrag-memory-integrate --diff /path/to/graphrag     print the change, write nothing
    graphrag-memory-integrate --check /path/to/graphrag    exit 0 if applied, 1 if not
    graphrag-memory-integrate --revert /path/to/graphrag   take it out again

The edits (`memory_client.graphrag.integration.edits`) are made to tigergraph/graphrag at cc4eed1:
15 lines in 4 files. Nothing is written unless every edit of every file finds its place: a checkout
where one is missing or found more than expected (another GraphRAG release) is refused with the file
and the edit named, exit status 2.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from memory_client.graphrag.integration.edits import EDITS, GRAPHRAG_COMMIT, Edit

__all__ = ["IntegrationError", "apply_integration", "integration_status", "main"]


class IntegrationError(Exception):
    """The checkout is not one these edits know (a piece of GraphRAG's code is not where, or
    not as often as, the edit expects it)."""


def _plan(root: Path, *, revert: bool) -> dict[Path, tuple[str, str]]:
    """Each file's text before and after, or IntegrationError naming what did not fit."""
    texts: dict[Path, tuple[str, str]] = {}
    for edit in EDITS:
        path = root / edit.path
        if path not in texts:
            if not path.is_file():
                raise IntegrationError(f"{edit.path}: not found (is {root} a GraphRAG checkout?)")
            original = path.read_text(encoding="utf-8")
            texts[path] = (original, original)
        original, text = texts[path]
        texts[path] = (original, _one(edit, text, revert=revert))
    return texts


def _one(edit: Edit, text: str, *, revert: bool) -> str:
    applied = text.count(edit.new)
    if not revert and applied == edit.count:
        return text  # already applied
    if revert and applied == 0 and text.count(edit.old) == edit.count:
        return text  # already reverted (or never applied)
    have, want = (edit.new, edit.old) if revert else (edit.old, edit.new)
    found = text.count(have)
    if found != edit.count:
        raise IntegrationError(
            f"{edit.path}: expected {edit.count} place(s) for '{edit.why}', found {found}; "
            f"these edits are for GraphRAG {GRAPHRAG_COMMIT}"
        )
    return text.replace(have, want)


def integration_status(root: Path) -> bool:
    """Whether every edit is in place in the checkout at `root`."""
    return all(after == before for before, after in _plan(root, revert=False).values())


def _write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, path.stat().st_mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def apply_integration(root: Path, *, revert: bool = False, dry_run: bool = False) -> str:
    """Applies (or reverts) the edits; returns the unified diff of what changed (or would)."""
    plan = _plan(root, revert=revert)
    diff: list[str] = []
    for path, (before, after) in plan.items():
        if before == after:
            continue
        rel = path.relative_to(root).as_posix()
        diff.extend(
            difflib.unified_diff(
                before.splitlines(keepends=True),
                after.splitlines(keepends=True),
                f"a/{rel}",
                f"b/{rel}",
            )
        )
    if not dry_run:
        for path, (before, after) in plan.items():
            if before != after:
                _write(path, after)
    return "".join(diff)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="graphrag-memory-integrate",
        description=f"Put graphrag-memory into a GraphRAG checkout (tigergraph/graphrag "
        f"{GRAPHRAG_COMMIT}): {len(EDITS)} edits in 4 files.",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--diff", action="store_true", help="print the change, write nothing")
    mode.add_argument("--check", action="store_true", help="exit 0 if applied, 1 if not")
    mode.add_argument("--revert", action="store_true", help="take the integration out")
    parser.add_argument("graphrag_dir", type=Path, help="the GraphRAG checkout's root")
    args = parser.parse_args(argv)
    root: Path = args.graphrag_dir
    try:
        if args.check:
            applied = integration_status(root)
            print("applied" if applied else "not applied")
            return 0 if applied else 1
        diff = apply_integration(root, revert=args.revert, dry_run=args.diff)
    except IntegrationError as exc:
        print(f"graphrag-memory-integrate: {exc}", file=sys.stderr)
        return 2
    if args.diff:
        sys.stdout.write(diff)
    elif diff:
        files = sum(1 for line in diff.splitlines() if line.startswith("+++ "))
        print(f"{'reverted' if args.revert else 'applied'} in {root}: {files} file(s) changed")
    else:
        print("nothing to do: already " + ("reverted" if args.revert else "applied"))
    return 0


def cli() -> None:
    raise SystemExit(main())


if __name__ == "__main__":
    cli()
