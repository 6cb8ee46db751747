"""The one table from exceptions to gRPC status codes."""

from __future__ import annotations

import asyncio
import logging

import asyncpg
import grpc

from memory_server.memory import errors

log = logging.getLogger(__name__)

_DOMAIN: list[tuple[type[BaseException], grpc.StatusCode]] = [
    (errors.InvalidArgument, grpc.StatusCode.INVALID_ARGUMENT),
    (errors.NotFound, grpc.StatusCode.NOT_FOUND),
    (errors.AlreadyExists, grpc.StatusCode.ALREADY_EXISTS),
    (errors.Overloaded, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (errors.Disabled, grpc.StatusCode.FAILED_PRECONDITION),
    (errors.Unavailable, grpc.StatusCode.UNAVAILABLE),
]

# asyncpg errors by SQLSTATE, for what reaches the edge from the store. Database faults are
# UNAVAILABLE, which clients retry: every write is idempotent by its client's ids (message id,
# fact text), so a retry after a lost acknowledgement stores nothing twice.
_SQLSTATE: dict[str, tuple[grpc.StatusCode, str]] = {
    "57014": (grpc.StatusCode.DEADLINE_EXCEEDED, "the database query ran out of time"),
    "53300": (grpc.StatusCode.UNAVAILABLE, "the database has too many connections; retry"),
    "57P01": (grpc.StatusCode.UNAVAILABLE, "the database connection was terminated; retry"),
    "57P02": (grpc.StatusCode.UNAVAILABLE, "the database is restarting after a crash; retry"),
    "57P03": (grpc.StatusCode.UNAVAILABLE, "the database is starting or recovering; retry"),
    "40001": (grpc.StatusCode.ABORTED, "a concurrent write conflicted; retry"),
    "40P01": (grpc.StatusCode.ABORTED, "a concurrent write conflicted; retry"),
}
# Whole classes: 08 connection exception, 53 insufficient resources (disk full, out of memory),
# 57P operator intervention, 58 system error (I/O), XX internal error of the database.
_SQLSTATE_CLASS: dict[str, tuple[grpc.StatusCode, str]] = {
    "08": (grpc.StatusCode.UNAVAILABLE, "the database connection was lost; retry"),
    "53": (grpc.StatusCode.UNAVAILABLE, "the database is out of resources; retry later"),
    "57P": (grpc.StatusCode.UNAVAILABLE, "the database is not accepting queries; retry"),
    "58": (grpc.StatusCode.UNAVAILABLE, "the database had an I/O error; retry later"),
    "XX": (grpc.StatusCode.UNAVAILABLE, "the database reported an internal error; retry later"),
}


def to_status(exc: BaseException) -> tuple[grpc.StatusCode, str]:
    for kind, code in _DOMAIN:
        if isinstance(exc, kind):
            return code, str(exc)
    if isinstance(exc, TimeoutError | asyncio.TimeoutError):
        return grpc.StatusCode.DEADLINE_EXCEEDED, "the request ran out of time"
    if isinstance(exc, asyncpg.PostgresError):
        state = getattr(exc, "sqlstate", "") or ""
        if state in _SQLSTATE:
            return _SQLSTATE[state]
        for prefix in (state[:3], state[:2]):
            if prefix in _SQLSTATE_CLASS:
                return _SQLSTATE_CLASS[prefix]
    if isinstance(exc, asyncpg.InterfaceError | ConnectionError | OSError):
        # Connection closed or reset, the pool closing, the server unreachable.
        return grpc.StatusCode.UNAVAILABLE, "the database is unreachable; retry"
    return grpc.StatusCode.INTERNAL, "internal error"
