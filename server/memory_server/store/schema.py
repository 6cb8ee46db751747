"""Versioned, idempotent schema migrations, applied at start.

Files `migrations/NNNN_name.sql` run in order, each in its own transaction, under an advisory
lock so that several servers starting on one database apply each version once. An applied
file whose text changed is an error: history is fixed once shipped.

The checksum covers the whole file, comments too, so a shipped file is never edited, not even
to tidy it. A later change to a PL/pgSQL function therefore states the function again, whole:
CREATE OR REPLACE FUNCTION takes only a complete body. That is why 0003_several_servers.sql
repeats memory_append_message from 0001_conversations.sql with one line added (the scope lock
taken first). Renaming 0001's function and wrapping it would have kept one body, at the price
of two functions to read for one; either way 0001 and 0003 stay as they are. For the same
reason their comments may name code that has moved since: 0003's `store/facts.py
claim_outbox` is store/facts/_outbox.py now.
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass
from importlib import resources

import asyncpg

log = logging.getLogger(__name__)

# Arbitrary constant: the advisory lock that serializes migrations across servers.
_MIGRATION_LOCK_KEY = 0x6D656D6F7279  # "memory"
_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


class MigrationError(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode("utf-8")).hexdigest()


def bundled_migrations() -> list[Migration]:
    found = []
    for entry in resources.files("memory_server.store").joinpath("migrations").iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise MigrationError(f"duplicate migration versions: {versions}")
    return found


async def apply_migrations(
    connection: asyncpg.Connection, migrations: list[Migration] | None = None
) -> list[int]:
    """Apply what is missing; returns the versions applied now."""
    migrations = bundled_migrations() if migrations is None else migrations
    applied_now: list[int] = []
    async with connection.transaction():
        await connection.execute("SELECT pg_advisory_xact_lock($1)", _MIGRATION_LOCK_KEY)
        await connection.execute(
            """CREATE TABLE IF NOT EXISTS schema_migrations (
                   version    integer PRIMARY KEY,
                   name       text NOT NULL,
                   checksum   text NOT NULL,
                   applied_at timestamptz NOT NULL DEFAULT now())"""
        )
        rows = await connection.fetch("SELECT version, checksum FROM schema_migrations")
        applied = {r["version"]: r["checksum"] for r in rows}
        known = {m.version for m in migrations}
        newer = sorted(v for v in applied if v not in known)
        if newer:
            raise MigrationError(
                f"the database has schema versions {newer} that this server does not know; "
                "run a newer server"
            )
        for migration in migrations:
            if migration.version in applied:
                if applied[migration.version] != migration.checksum:
                    raise MigrationError(
                        f"migration {migration.version:04d}_{migration.name} changed after it "
                        "was applied"
                    )
                continue
            async with connection.transaction():  # a savepoint per migration
                await connection.execute(migration.sql)
                await connection.execute(
                    "INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
                    migration.version,
                    migration.name,
                    migration.checksum,
                )
            applied_now.append(migration.version)
            log.info("applied migration %04d_%s", migration.version, migration.name)
    return applied_now
