"""What every fact statement shares: the belief predicate, the version columns, the scope lookup,
and reading a version row back."""

from __future__ import annotations

import uuid

import asyncpg

from memory_server.memory.errors import InvalidArgument
from memory_server.memory.facts.model import FactKind, FactVersion, LiveFact
from memory_server.memory.identity import Scope
from memory_server.store.rows import row_reader

# The belief predicate on fact_versions `v`, with $V (valid time) and $T (transaction time)
# bound by the caller; NULL means now.
BELIEVED = """v.recorded_at <= COALESCE({t}, now())
    AND (v.superseded_at IS NULL OR COALESCE({t}, now()) < v.superseded_at)
    AND v.valid_from <= COALESCE({v}, now())
    AND (v.valid_to IS NULL OR COALESCE({v}, now()) < v.valid_to)"""
LIVE = "v.superseded_at IS NULL AND v.valid_to IS NULL"

VERSION_COLUMNS = """v.id AS version_id, v.fact_id, v.text, v.kind, v.valid_from, v.valid_to,
    v.recorded_at, v.superseded_at, v.conversation_id, v.message_id, v.extractor, v.standing,
    v.event_at, v.event_period"""

SCOPE_ID = "(SELECT id FROM scopes WHERE username = $1 AND graphname = $2)"


class OnPool:
    """One part of PostgresFactStore: its statements run on the pool the store was given."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool


def optional_id(value: uuid.UUID | None) -> str:
    """A nullable uuid column as the domain has it: text, empty for NULL."""
    return str(value or "")


read_version = row_reader(FactVersion, version_id=str, fact_id=str, kind=FactKind)
"""A FactVersion from a row of VERSION_COLUMNS."""


async def fetch(
    db: asyncpg.Pool | asyncpg.Connection, timeout_s: float | None, sql: str, *args: object
) -> list[asyncpg.Record]:
    """`sql`'s rows, the wait for a pool's connection and the statement each bounded by
    `timeout_s` (None: no limit but the pool's own), as the conversation store does."""
    if isinstance(db, asyncpg.Connection):
        rows: list[asyncpg.Record] = await db.fetch(sql, *args, timeout=timeout_s)
        return rows
    async with db.acquire(timeout=timeout_s) as conn:
        rows = await conn.fetch(sql, *args, timeout=timeout_s)
        return rows


async def live_facts(
    db: asyncpg.Pool | asyncpg.Connection, scope: Scope, timeout_s: float | None = None
) -> list[LiveFact]:
    rows = await fetch(
        db,
        timeout_s,
        f"""SELECT v.fact_id, v.id, v.text, v.kind FROM fact_versions v
            WHERE v.scope_id = {SCOPE_ID} AND {LIVE} ORDER BY v.recorded_at, v.id""",
        scope.username,
        scope.graphname,
    )
    return [LiveFact(str(r["fact_id"]), str(r["id"]), r["text"], FactKind(r["kind"])) for r in rows]


def fact_uuid(field: str, value: str) -> uuid.UUID:
    """A fact id from a request; InvalidArgument naming `field` if it is not one."""
    try:
        return uuid.UUID(value)
    except ValueError:
        raise InvalidArgument(field, "is not a fact id") from None
