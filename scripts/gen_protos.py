"""Regenerate the committed gRPC stubs from protos/ (pinned grpcio-tools, see pyproject)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTOS = ROOT / "protos"
OUT = ROOT / "clients"


def main() -> int:
    # --mypy_out runs the protoc-gen-mypy plugin, which lives beside this interpreter.
    bin_dir = Path(sys.executable).parent
    plugin = shutil.which("protoc-gen-mypy", path=str(bin_dir))
    if plugin is None:
        print("protoc-gen-mypy not found: pip install -e '.[dev]'", file=sys.stderr)
        return 2
    grpc_include = Path(protoc.__file__).parent / "_proto"
    sources = sorted(str(p.relative_to(PROTOS)) for p in PROTOS.rglob("*.proto"))
    args = [
        "protoc",
        f"-I{PROTOS}",
        f"-I{grpc_include}",
        f"--plugin=protoc-gen-mypy={plugin}",
        f"--plugin=protoc-gen-mypy_grpc={bin_dir / 'protoc-gen-mypy_grpc'}",
        f"--python_out={OUT}",
        f"--grpc_python_out={OUT}",
        f"--mypy_out={OUT}",
        f"--mypy_grpc_out={OUT}",
        *sources,
    ]
    code = protoc.main(args)
    if code != 0:
        return int(code)
    print(f"generated {len(sources)} proto file(s) into {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
