"""Regenerate the committed gRPC stubs from protos/ with the grpcio-tools pinned in pyproject's
dev extra, and only that one.

The pin is the oldest runtime the client supports (graphrag-memory-client: grpcio >= 1.73.1,
protobuf >= 6.31.1): generated code refuses older runtimes (`*_pb2.py` raises VersionError
under a protobuf older than its gencode, `*_pb2_grpc.py` raises RuntimeError under a grpcio
older than its generator), so another grpcio-tools would silently narrow what the client
installs beside."""

from __future__ import annotations

import re
import shutil
import sys
import tomllib
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTOS = ROOT / "protos"
OUT = ROOT / "clients"
_SERVICE = re.compile(r"^\s*service\s+\w+", re.M)


def pinned_tools_version() -> str:
    dev = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for requirement in dev["dev"]:
        match = re.fullmatch(r"grpcio-tools==(\S+)", requirement.strip())
        if match:
            return match[1]
    raise SystemExit("pyproject.toml: the dev extra pins no grpcio-tools==VERSION")


def main() -> int:
    wanted = pinned_tools_version()
    try:
        found = metadata.version("grpcio-tools")
    except metadata.PackageNotFoundError:
        found = "none"
    if found != wanted:
        print(
            f"gen_protos: grpcio-tools {found} is installed, the stubs are generated with "
            f"{wanted} only (pyproject's dev extra; the oldest runtime the client supports). "
            f"Install it: {sys.executable} -m pip install grpcio-tools=={wanted}",
            file=sys.stderr,
        )
        return 2
    from grpc_tools import protoc

    # --mypy_out runs the protoc-gen-mypy plugin, which lives beside this interpreter.
    bin_dir = Path(sys.executable).parent
    plugin = shutil.which("protoc-gen-mypy", path=str(bin_dir))
    if plugin is None:
        print(
            "protoc-gen-mypy not found: the dev install "
            "(pip install -c requirements/constraints.txt -e ./clients -e '.[dev]')",
            file=sys.stderr,
        )
        return 2
    grpc_include = Path(protoc.__file__).parent / "_proto"
    files = sorted(PROTOS.rglob("*.proto"))
    sources = [str(p.relative_to(PROTOS)) for p in files]
    # gRPC stubs only where there is a service: a message-only file would get an empty one.
    services = [str(p.relative_to(PROTOS)) for p in files if _SERVICE.search(p.read_text())]
    common = [
        "protoc",
        f"-I{PROTOS}",
        f"-I{grpc_include}",
        f"--plugin=protoc-gen-mypy={plugin}",
        f"--plugin=protoc-gen-mypy_grpc={bin_dir / 'protoc-gen-mypy_grpc'}",
    ]
    for args in (
        [*common, f"--python_out={OUT}", f"--mypy_out={OUT}", *sources],
        [*common, f"--grpc_python_out={OUT}", f"--mypy_grpc_out={OUT}", *services],
    ):
        code = protoc.main(args)
        if code != 0:
            return int(code)
    print(
        f"generated {len(sources)} proto file(s), {len(services)} with services, "
        f"into {OUT.relative_to(ROOT)} (grpcio-tools {found})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
