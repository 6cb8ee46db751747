"""Schema migrations: applied once, idempotent, and refusing edited history."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest

from memory_server.store.schema import (
    Migration,
    MigrationError,
    apply_migrations,
    bundled_migrations,
)


@pytest.fixture
async def fresh_database(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    name = f"migrations_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(database_url)
    await admin.execute(f'CREATE DATABASE "{name}"')
    connection = await asyncpg.connect(database_url, database=name)
    try:
        yield connection
    finally:
        await connection.close()
        await admin.execute(f'DROP DATABASE "{name}"')
        await admin.close()


async def _schema(connection: asyncpg.Connection) -> list[tuple[str, str]]:
    rows = await connection.fetch(
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE table_schema = 'public' ORDER BY 1, 2"
    )
    return [(r["table_name"], r["column_name"]) for r in rows]


async def test_second_run_changes_nothing(fresh_database: asyncpg.Connection):
    applied = await apply_migrations(fresh_database)
    assert applied == [m.version for m in bundled_migrations()]
    schema = await _schema(fresh_database)
    assert ("messages", "content") in schema and ("conversation_summaries", "through_seq") in schema
    assert await apply_migrations(fresh_database) == []
    assert await _schema(fresh_database) == schema


async def test_edited_or_unknown_history_is_refused(fresh_database: asyncpg.Connection):
    migrations = bundled_migrations()
    await apply_migrations(fresh_database, migrations)
    edited = [Migration(m.version, m.name, m.sql + "\n-- edited") for m in migrations]
    with pytest.raises(MigrationError, match="changed after it was applied"):
        await apply_migrations(fresh_database, edited)
    with pytest.raises(MigrationError, match="does not know"):
        await apply_migrations(fresh_database, migrations[:-1])


async def test_failed_migration_leaves_nothing(fresh_database: asyncpg.Connection):
    broken = [*bundled_migrations(), Migration(9999, "broken", "CREATE TABLE t (x int); SELEC 1;")]
    with pytest.raises(asyncpg.PostgresSyntaxError):
        await apply_migrations(fresh_database, broken)
    assert await _schema(fresh_database) == []
