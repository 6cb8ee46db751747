"""The MCP extra's native code (cryptography and cffi under PyJWT, rpds-py under jsonschema,
pydantic-core) runs on a baseline x86-64 CPU, and every package of the extra has an aarch64
wheel. The machines the tests run on have AVX-512, so importing here proves nothing: the probe
runs under qemu's `qemu64` CPU (x86-64 with SSE2, no AVX), which the first test shows traps an
AVX2 instruction, and does real work with each native module before listing the MCP tools."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    platform.machine().lower() not in ("x86_64", "amd64"), reason="x86-64 emulation"
)

BASELINE_CPU = "qemu64"
PROBE = """
import asyncio, json
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ed25519
import jsonschema, pydantic_core, rpds
from memory_client.mcp_server.app import build_server
from memory_client.mcp_server.tools import Memory

digest = hashes.Hash(hashes.SHA256())
digest.update(b"x" * 100_000)
key = ed25519.Ed25519PrivateKey.generate()
key.public_key().verify(key.sign(b"m"), b"m")
jsonschema.validate({"a": 1}, {"type": "object", "properties": {"a": {"type": "integer"}}})
server = build_server(Memory(lambda: None, lambda ctx: None))
tools = asyncio.run(server.list_tools())
print(json.dumps({
    "sha256": digest.finalize().hex()[:8],
    "rpds": len(rpds.HashTrieMap({"a": 1}).insert("b", 2)),
    "pydantic_core": pydantic_core.__version__,
    "tools": sorted(t.name for t in tools),
}))
"""


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not on PATH (apt-get install qemu-user gcc)")
    return found


def test_the_baseline_cpu_traps_avx2(tmp_path: Path) -> None:
    source = tmp_path / "avx2.c"
    source.write_text(
        "#include <immintrin.h>\n#include <stdio.h>\n"
        "int main(int argc, char **argv) { volatile float a[8] = {1, 2, 3, 4, 5, 6, 7, 8};\n"
        "  __m256 v = _mm256_loadu_ps((float *)a); v = _mm256_add_ps(v, v);\n"
        '  float o[8]; _mm256_storeu_ps(o, v); printf("%.1f\\n", o[argc]); return 0; }\n'
    )
    program = tmp_path / "avx2"
    subprocess.run([_tool("gcc"), "-O1", "-mavx2", source, "-o", program], check=True)
    trapped = subprocess.run(
        [_tool("qemu-x86_64"), "-cpu", BASELINE_CPU, program],
        capture_output=True, text=True, cwd=tmp_path, timeout=60,
    )  # fmt: skip
    assert trapped.returncode == -4 or trapped.returncode == 132, trapped  # SIGILL


def test_the_mcp_extra_runs_on_a_baseline_x86_64_cpu(tmp_path: Path) -> None:
    done = subprocess.run(
        [_tool("qemu-x86_64"), "-cpu", BASELINE_CPU, sys.executable, "-c", PROBE],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["sha256"] == "d69e6898" and report["rpds"] == 2
    assert "search_memory" in report["tools"] and len(report["tools"]) == 7


@pytest.mark.slow
def test_the_mcp_extra_has_aarch64_wheels(tmp_path: Path) -> None:
    """pip resolves the extra's whole closure for manylinux2014 aarch64 from binary wheels."""
    from importlib.metadata import version

    pins = [f"mcp=={version('mcp')}", f"uvicorn=={version('uvicorn')}", "grpcio", "protobuf"]
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:",
         "--platform", "manylinux2014_aarch64", "--python-version", "3.11",
         "--implementation", "cp", "-d", tmp_path, *pins],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    if done.returncode != 0 and os.environ.get("MEMORY_REQUIRE_PIP") != "1":
        pytest.skip(f"pip download failed (no index?): {done.stderr[-300:]}")
    assert done.returncode == 0, done.stderr[-3000:]
    native = sorted(p.name for p in tmp_path.glob("*.whl") if "none-any" not in p.name)
    assert native and all("aarch64" in name for name in native), native
    print("aarch64 wheels:", native)
