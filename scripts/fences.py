"""The house's fences, checked in CI (scripts/dev.sh ci): no product module over 400 lines, no
product folder holding more than 15 modules, and no benchmark reaching into the server's or the
client's private modules or names. Strict typing of bench/ and scripts/ is part of lint.

Prints one line per breach and exits 1 when there is any; exits 0 silently otherwise.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = (ROOT / "server" / "memory_server", ROOT / "clients" / "memory_client")
GENERATED = ROOT / "clients" / "memory_client" / "v1"
PRODUCT_PACKAGES = ("memory_server", "memory_client")
MAX_MODULE_LINES = 400
MAX_MODULES_PER_FOLDER = 15


def product_modules() -> Iterator[Path]:
    for package in PRODUCT:
        for path in sorted(package.rglob("*.py")):
            if GENERATED not in path.parents:
                yield path


def long_modules() -> Iterator[str]:
    for path in product_modules():
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_MODULE_LINES:
            name = path.relative_to(ROOT)
            yield f"{name}: {lines} lines (at most {MAX_MODULE_LINES}; split it by concept)"


def crowded_folders() -> Iterator[str]:
    folders: dict[Path, int] = {}
    for path in product_modules():
        if path.name != "__init__.py":
            folders[path.parent] = folders.get(path.parent, 0) + 1
    for folder, count in sorted(folders.items()):
        if count > MAX_MODULES_PER_FOLDER:
            name = folder.relative_to(ROOT)
            yield f"{name}/: {count} modules (at most {MAX_MODULES_PER_FOLDER}; give it rooms)"


def _private(dotted: str) -> bool:
    parts = dotted.split(".")
    return parts[0] in PRODUCT_PACKAGES and any(
        p.startswith("_") and not p.startswith("__") for p in parts[1:]
    )


def private_uses(path: Path) -> Iterator[str]:
    """Imports of a private product module or name, and private attributes read or set on
    anything but `self`/`cls` (the benchmark's own objects)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    name = path.relative_to(ROOT) if ROOT in path.parents else path
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _private(alias.name):
                    yield f"{name}:{node.lineno}: imports private {alias.name}"
        elif isinstance(node, ast.ImportFrom) and node.module:
            if _private(node.module):
                yield f"{name}:{node.lineno}: imports from private {node.module}"
            elif node.module.split(".")[0] in PRODUCT_PACKAGES:
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        yield f"{name}:{node.lineno}: imports private {node.module}.{alias.name}"
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            owner = node.value
            if node.attr.startswith("__") or (
                isinstance(owner, ast.Name) and owner.id in ("self", "cls")
            ):
                continue
            yield f"{name}:{node.lineno}: uses private attribute .{node.attr}"


def bench_breaches() -> Iterator[str]:
    for path in sorted((ROOT / "bench").glob("*.py")):
        yield from private_uses(path)


def main() -> int:
    breaches = [*long_modules(), *crowded_folders(), *bench_breaches()]
    for line in breaches:
        print(f"fence: {line}")
    return 1 if breaches else 0


if __name__ == "__main__":
    sys.exit(main())
