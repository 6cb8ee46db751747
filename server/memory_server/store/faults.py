"""Which asyncpg errors are faults of the database (a dropped connection, a restart, a crash,
recovery, exhausted resources) rather than of the request. One classification for the pool,
which turns them into the domain's Unavailable, and for the gRPC edge's status table."""

from __future__ import annotations

import asyncpg


def database_fault(exc: BaseException) -> str | None:
    """Why `exc` is a fault of the database; None if it is not one."""
    if isinstance(exc, TimeoutError):
        return None  # a statement or pool timeout: the caller's deadline, not a fault
    state = getattr(exc, "sqlstate", None) or ""
    if isinstance(exc, asyncpg.PostgresConnectionError) or state.startswith("08"):
        return "the database connection was lost"
    if state == "57P03":
        return "the database is starting up or recovering"
    if state.startswith("57P"):
        return "the database terminated the connection (restart, crash or shutdown)"
    if state.startswith("53"):
        return "the database is out of resources"
    if state.startswith("58"):
        return "the database had an I/O error"
    if state.startswith("XX"):
        return "the database reported an internal error"
    # asyncpg's own state after the server dropped a connection mid-operation (asyncpg #784),
    # a closed connection or pool, a socket error.
    if isinstance(exc, asyncpg.InternalClientError | asyncpg.InterfaceError | OSError):
        return "the database connection was lost"
    return None
