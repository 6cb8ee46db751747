"""Opening the database: the embedded PostgreSQL when no URL is configured, a pool, and the
schema migrations. Shared by the server and the admin commands."""

from __future__ import annotations

import logging
from contextlib import AsyncExitStack
from pathlib import Path

import asyncpg

from memory_server.settings import Settings
from memory_server.store.embedded import EmbeddedPostgres, default_data_dir
from memory_server.store.schema import apply_migrations

log = logging.getLogger(__name__)


async def open_database(settings: Settings, stack: AsyncExitStack) -> tuple[str, asyncpg.Pool]:
    """(dsn, pool), migrated; everything opened is closed by `stack`."""
    dsn = settings.database_url
    if not dsn:
        data_dir = Path(settings.data_dir) if settings.data_dir else default_data_dir()
        embedded = EmbeddedPostgres(data_dir)
        dsn = await embedded.start()
        stack.push_async_callback(embedded.close)
        log.info("embedded PostgreSQL in %s", data_dir)
    pool = await asyncpg.create_pool(
        dsn,
        min_size=settings.db_pool_min_size,
        max_size=settings.db_pool_max_size,
        command_timeout=settings.request_timeout_seconds,
    )
    stack.push_async_callback(pool.close)
    async with pool.acquire() as connection:
        await apply_migrations(connection)
    return dsn, pool
