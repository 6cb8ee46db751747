"""The pgvector index kind, changed by hand: a property of the database (index/pgvector.py).

    python -m memory_server.admin index-kind show|hnsw|exact [settings flags]

  show   the recorded kind, the HNSW indexes on memory_vectors, and what searches use
  hnsw   records hnsw, waits SETTLE_S so that every running server has read it, then builds
         the index with CREATE INDEX CONCURRENTLY: writes and searches go on meanwhile
  exact  records exact, then DROP INDEX CONCURRENTLY; servers go back to plain exact scans
         within KIND_REFRESH_S

Each run is idempotent: what is already so is left as it is (a valid index is not built again),
and an index an interrupted build left invalid is dropped and built again. It is meant to run
while servers serve; two runs at once on one database are refused. Settings come from the same
places as the server's (--config, GRAPHRAG_MEMORY_*, flags); only the database's are used. The
build runs on its own connection without a statement timeout, with the session's
maintenance_work_mem (pgvector says when the graph outgrows it; set it for the role).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import datetime
from typing import get_args

import asyncpg

from memory_server.index.pgvector import (
    HNSW_INDEX,
    KIND_REFRESH_S,
    SCAN_WITH_HNSW,
    Hnsw,
    IndexKind,
)
from memory_server.settings import SettingsError, settings_from_cli
from memory_server.store.database import open_database

log = logging.getLogger(__name__)

_TABLE = "memory_vectors"
# Between recording hnsw and building: a server's reading is at most KIND_REFRESH_S old when a
# search starts, and a search may start a little after its reading (a busy event loop).
SETTLE_S = 2 * KIND_REFRESH_S + 1.0
# A session lock: one run at a time per database (a second build would see the first's index,
# not yet valid, and take it for an interrupted one).
_RUN_LOCK = "memory_server.index.pgvector_kind"
_HNSW_INDEXES = """SELECT c.relname AS name, i.indisvalid AS valid,
                          pg_get_indexdef(i.indexrelid) AS definition
                   FROM pg_index i
                   JOIN pg_class c ON c.oid = i.indexrelid
                   JOIN pg_am a ON a.oid = c.relam
                   WHERE i.indrelid = to_regclass($1) AND a.amname = 'hnsw'
                   ORDER BY c.relname"""

Say = Callable[[str], None]


class PgVectorKindError(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class HnswIndex:
    name: str
    valid: bool
    definition: str


@dataclass(frozen=True, slots=True)
class KindState:
    recorded: str | None
    changed_at: datetime | None
    changed_by: str | None
    table: bool
    rows: int
    indexes: tuple[HnswIndex, ...]
    searches_with_hnsw: bool


async def read_state(conn: asyncpg.Connection) -> KindState:
    row = await conn.fetchrow("SELECT kind, changed_at, changed_by FROM pgvector_index")
    indexes = await conn.fetch(_HNSW_INDEXES, _TABLE)
    rows = await conn.fetchval(
        "SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = to_regclass($1)", _TABLE
    )
    return KindState(
        recorded=None if row is None else row["kind"],
        changed_at=None if row is None else row["changed_at"],
        changed_by=None if row is None else row["changed_by"],
        table=rows is not None,
        rows=int(rows or 0),
        indexes=tuple(HnswIndex(r["name"], r["valid"], r["definition"]) for r in indexes),
        searches_with_hnsw=bool(await conn.fetchval(SCAN_WITH_HNSW)),
    )


def describe(state: KindState) -> list[str]:
    if state.recorded is None:
        kind = "kind: none recorded yet (the first server to make the vectors table records it)"
    else:
        kind = f"kind: {state.recorded} (since {state.changed_at:%Y-%m-%d %H:%M:%S %Z}: "
        kind += f"{state.changed_by})"
    lines = [kind]
    lines.append(f"{_TABLE}: about {state.rows:,} rows" if state.table else f"{_TABLE}: not made")
    for index in state.indexes:
        valid = "valid" if index.valid else "NOT VALID (an interrupted build: run hnsw again)"
        lines.append(f"index {index.name}: {valid}: {index.definition}")
    if state.table and not state.indexes:
        lines.append("no HNSW index")
    scan = "with HNSW's scan settings" if state.searches_with_hnsw else "exact scans"
    lines.append(f"searches: {scan}")
    return lines


async def switch(
    conn: asyncpg.Connection,
    kind: IndexKind,
    *,
    hnsw: Hnsw | None = None,
    settle_s: float = SETTLE_S,
    say: Say = log.info,
) -> bool:
    """Makes `kind` the database's, index included; whether anything changed. `conn` is a
    connection of its own, outside any transaction (CONCURRENTLY needs that)."""
    if kind not in get_args(IndexKind):
        raise PgVectorKindError(f"unknown kind {kind!r}: expected exact or hnsw")
    if not await conn.fetchval("SELECT pg_try_advisory_lock(hashtext($1))", _RUN_LOCK):
        raise PgVectorKindError("another pgvector_kind run is under way on this database")
    try:
        # A build takes as long as it takes; the role's statement timeout is not for it.
        await conn.execute("SET statement_timeout = 0")
        if kind == "hnsw":
            return await _to_hnsw(conn, hnsw or Hnsw(), settle_s, say)
        return await _to_exact(conn, say)
    finally:
        await conn.execute("SELECT pg_advisory_unlock(hashtext($1))", _RUN_LOCK)


async def _record(conn: asyncpg.Connection, kind: IndexKind, say: Say) -> tuple[bool, float]:
    """Records `kind`: (whether it changed, seconds since it was recorded)."""
    async with conn.transaction():
        # The lock of a server's first use (index/pgvector.py), which reads the kind under it.
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1))", _TABLE)
        row = await conn.fetchrow(
            "SELECT kind, extract(epoch FROM now() - changed_at)::float8 AS age_s "
            "FROM pgvector_index"
        )
        if row is not None and row["kind"] == kind:
            say(f"kind: {kind} (recorded already)")
            return False, float(row["age_s"])
        await conn.execute(
            """INSERT INTO pgvector_index (kind, changed_by) VALUES ($1, $2)
               ON CONFLICT (one_row) DO UPDATE
               SET kind = EXCLUDED.kind, changed_at = now(), changed_by = EXCLUDED.changed_by""",
            kind,
            f"pgvector_kind {kind} on {socket.gethostname()}",
        )
    was = "none" if row is None else row["kind"]
    say(f"kind: {kind} (recorded; was {was})")
    return True, 0.0


async def _to_hnsw(conn: asyncpg.Connection, hnsw: Hnsw, settle_s: float, say: Say) -> bool:
    changed, age_s = await _record(conn, "hnsw", say)
    state = await read_state(conn)
    if not state.table:
        say(f"{_TABLE} is not made yet: the first server to make it makes the index with it")
        return changed
    ours = next((i for i in state.indexes if i.name == HNSW_INDEX), None)
    if ours is not None and ours.valid:
        say(f"index {HNSW_INDEX}: there and valid, nothing to build")
        return changed
    if ours is not None:
        say(f"index {HNSW_INDEX}: not valid (an interrupted build), dropping it")
        await conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {HNSW_INDEX}")
    if settle_s - age_s > 0:
        say(f"waiting {settle_s - age_s:.1f} s for running servers to read the kind")
        await asyncio.sleep(settle_s - age_s)
    say(
        f"building {HNSW_INDEX} (m {hnsw.m}, ef_construction {hnsw.ef_construction}) "
        f"concurrently over about {state.rows:,} rows; writes and searches go on"
    )
    began = time.monotonic()
    await conn.execute(hnsw.create_sql(concurrently=True))
    built = await conn.fetchval(
        "SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass($1)", HNSW_INDEX
    )
    if not built:
        raise PgVectorKindError(f"{HNSW_INDEX} was not built valid; run hnsw again")
    say(f"index {HNSW_INDEX}: built in {time.monotonic() - began:.1f} s")
    return True


async def _to_exact(conn: asyncpg.Connection, say: Say) -> bool:
    changed, _ = await _record(conn, "exact", say)
    # Dropped after exact is recorded: servers keep the scan settings while an index exists.
    indexes = (await read_state(conn)).indexes
    if any(i.name == HNSW_INDEX for i in indexes):
        say(f"dropping {HNSW_INDEX} concurrently")
        await conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {HNSW_INDEX}")
        say(f"index {HNSW_INDEX}: dropped; servers search exactly within {KIND_REFRESH_S:g} s")
        changed = True
    else:
        say(f"index {HNSW_INDEX}: none to drop")
    for other in (i for i in indexes if i.name != HNSW_INDEX):
        say(
            f"index {other.name}: an HNSW index this command did not make, left; searches keep "
            "HNSW's scan settings while it exists"
        )
    return changed


async def run(settings_argv: Sequence[str], command: str, say: Say) -> None:
    settings = settings_from_cli(settings_argv, os.environ)
    async with AsyncExitStack() as stack:
        dsn, _ = await open_database(settings, stack)  # the schema migrated
        conn = await asyncpg.connect(dsn)  # no command timeout: a build takes long
        stack.push_async_callback(conn.close)
        conn.add_log_listener(lambda _c, message: say(f"PostgreSQL: {message.message}"))
        if command == "show":
            for line in describe(await read_state(conn)):
                say(line)
        else:
            await switch(conn, "hnsw" if command == "hnsw" else "exact", say=say)


def cli(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in ("show", "hnsw", "exact"):
        sys.stderr.write(
            "usage: python -m memory_server.admin index-kind show|hnsw|exact [settings flags]\n"
        )
        return 2

    def say(line: str) -> None:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    logging.basicConfig(
        level=logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        asyncio.run(run(args[1:], args[0], say))
    except SettingsError as exc:
        sys.stderr.write(f"configuration error: {exc}\n")
        return 2
    except (PgVectorKindError, asyncpg.PostgresError, OSError) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(cli())
