"""Opening the database: the embedded PostgreSQL when no URL is configured, a pool, and the
schema migrations. Shared by the server and the admin commands."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Generator
from contextlib import AsyncExitStack
from pathlib import Path
from types import TracebackType
from typing import Any

import asyncpg

from memory_server.database_url import DatabaseUrl, parse_database_url
from memory_server.memory.errors import Unavailable
from memory_server.settings import Settings
from memory_server.store.embedded import EmbeddedPostgres, default_data_dir
from memory_server.store.faults import database_fault
from memory_server.store.schema import apply_migrations

log = logging.getLogger(__name__)


class PoolExhausted(Unavailable):
    """No connection came free within the pool's wait."""


class DatabaseUnavailable(Unavailable):
    """PostgreSQL dropped the connection, is restarting or recovering, or is out of resources.
    A write may have committed before its acknowledgement was lost: retry it with the same
    client ids (message id, fact text), which makes the retry store nothing twice."""


async def keep_session(connection: asyncpg.Connection) -> None:
    """The pool's reset on release: nothing beyond what asyncpg always does (roll back an open
    transaction, drop listeners). asyncpg's default also sends `pg_advisory_unlock_all(); CLOSE
    ALL; UNLISTEN *; RESET ALL` to the server, one round trip per release, and a recall turn
    releases a connection for each of its statements. The server keeps no session state to
    undo: its advisory locks are transaction-scoped (`pg_advisory_xact_lock`), it sets no
    session settings (use `SET LOCAL` in a transaction), and it neither LISTENs nor keeps a
    cursor past a transaction. tests/test_pool.py checks that a released connection comes back
    as it went."""


class BoundedWaitPool(asyncpg.Pool):  # type: ignore[misc]
    """An asyncpg pool whose every acquisition (``pool.fetch`` and friends too) waits at most
    `acquire_wait_s`, or the caller's own shorter timeout. Past the pool's wait it raises
    PoolExhausted (UNAVAILABLE: retry elsewhere or later); past the caller's, TimeoutError as
    before (its deadline). A released connection is not reset beyond asyncpg's own clean-up
    (`keep_session`)."""

    def __init__(self, dsn: str, *, acquire_wait_s: float, **kwargs: Any) -> None:
        self._acquire_wait_s = acquire_wait_s
        kwargs.setdefault("reset", keep_session)
        defaults = inspect.signature(asyncpg.create_pool).parameters
        for name in _POOL_KEYWORDS:
            kwargs.setdefault(name, defaults[name].default)
        super().__init__(dsn, **kwargs)

    def acquire(self, *, timeout: float | None = None) -> _BoundedAcquire:
        if timeout is not None and timeout < self._acquire_wait_s:
            return _BoundedAcquire(self, timeout, None)
        return _BoundedAcquire(self, self._acquire_wait_s, self._acquire_wait_s)


# The connection setting migration 0010's trigger reads.
EPISODES_SETTING = "graphrag_memory.episodes"

# Pool() takes these as required keywords; create_pool() supplies its defaults for them.
_POOL_KEYWORDS = (
    "max_queries",
    "max_inactive_connection_lifetime",
    "loop",
    "connection_class",
    "record_class",
)


class _BoundedAcquire(asyncpg.pool.PoolAcquireContext):  # type: ignore[misc]
    __slots__ = ("pool_wait_s",)

    def __init__(self, pool: BoundedWaitPool, timeout: float, pool_wait_s: float | None) -> None:
        super().__init__(pool, timeout)
        self.pool_wait_s = pool_wait_s

    async def __aenter__(self) -> asyncpg.Connection:
        try:
            return await super().__aenter__()
        except TimeoutError:
            raise self._exhausted() from None
        except Exception as exc:
            if (why := database_fault(exc)) is None:
                raise
            raise DatabaseUnavailable(f"{why}; retry") from exc

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            await super().__aexit__(exc_type, exc, tb)
        except Exception as release_error:
            # Resetting a connection the server dropped fails (asyncpg terminates it; a new
            # one is made on the next acquire). The block's own outcome stands: what it
            # committed is committed, and its own exception, if any, goes on below.
            if database_fault(release_error) is None:
                raise
            log.info("dropped a broken database connection: %s", type(release_error).__name__)
        if exc is not None and not isinstance(exc, Unavailable):
            why = database_fault(exc)
            if why is not None:
                raise DatabaseUnavailable(f"{why}; retry") from exc

    def __await__(self) -> Generator[Any, None, asyncpg.Connection]:
        try:
            return (yield from super().__await__())
        except TimeoutError:
            raise self._exhausted() from None

    def _exhausted(self) -> BaseException:
        if self.pool_wait_s is None:
            return TimeoutError()
        return PoolExhausted(
            f"no database connection came free within {self.pool_wait_s:g} s "
            f"(db_pool_max_size {self.pool.get_max_size()}); retry"
        )


class DatabaseStartError(RuntimeError):
    """The database could not be reached or refused this server at start; the message names
    the URL without its password, and why."""


def _refusal(url: DatabaseUrl | None, dsn: str, exc: BaseException) -> str:
    why = str(exc).strip() or type(exc).__name__
    if isinstance(exc, TimeoutError):
        why = "no connection within the connect timeout"
    if url is None:
        return f"database {dsn}: {why}"
    return f"database {url.shown}: {url.scrub(why)}"


async def open_database(
    settings: Settings, stack: AsyncExitStack, *, vector_dimension: int | None = None
) -> tuple[str, asyncpg.Pool]:
    """(dsn, pool), migrated; everything opened is closed by `stack`. With `vector_dimension`,
    the embedded database must first answer a pgvector distance query of that dimension."""
    url = parse_database_url(settings.database_url) if settings.database_url else None
    if url is not None:
        dsn = url.dsn
    else:
        data_dir = Path(settings.data_dir) if settings.data_dir else default_data_dir()
        embedded = EmbeddedPostgres(data_dir)
        dsn = await embedded.start()
        stack.push_async_callback(embedded.close)
        log.info("embedded PostgreSQL in %s", data_dir)
        if vector_dimension is not None:
            await embedded.check_vector(vector_dimension)
    pool = BoundedWaitPool(
        dsn,
        acquire_wait_s=settings.db_pool_wait_seconds,
        min_size=settings.db_pool_min_size,
        max_size=settings.db_pool_max_size,
        command_timeout=settings.request_timeout_seconds,
        # Whether this server's new messages are queued for embedding as episodes (the
        # trigger of migration 0010 reads it in the statement that stores them).
        server_settings={EPISODES_SETTING: "on" if settings.episodes else "off"},
        **({"timeout": url.connect_timeout_s} if url and url.connect_timeout_s else {}),
    )
    try:
        await pool
    except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        raise DatabaseStartError(_refusal(url, dsn, exc)) from None
    stack.push_async_callback(pool.close)
    async with pool.acquire() as connection:
        await apply_migrations(connection)
    return dsn, pool
