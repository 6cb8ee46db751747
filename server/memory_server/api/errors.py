"""The one table from exceptions to gRPC status codes."""

from __future__ import annotations

import asyncio

import asyncpg
import grpc

from memory_server.memory import errors
from memory_server.store.faults import database_fault

_DOMAIN: list[tuple[type[BaseException], grpc.StatusCode]] = [
    (errors.InvalidArgument, grpc.StatusCode.INVALID_ARGUMENT),
    (errors.NotFound, grpc.StatusCode.NOT_FOUND),
    (errors.AlreadyExists, grpc.StatusCode.ALREADY_EXISTS),
    (errors.Overloaded, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (errors.Disabled, grpc.StatusCode.FAILED_PRECONDITION),
    (errors.Unavailable, grpc.StatusCode.UNAVAILABLE),
]

# asyncpg errors that are not faults of the database, by SQLSTATE. Faults (store.faults) are
# UNAVAILABLE, which clients retry: every write is idempotent by its client's ids (message id,
# fact text), so a retry after a lost acknowledgement stores nothing twice.
_SQLSTATE: dict[str, tuple[grpc.StatusCode, str]] = {
    "57014": (grpc.StatusCode.DEADLINE_EXCEEDED, "the database query ran out of time"),
    "40001": (grpc.StatusCode.ABORTED, "a concurrent write conflicted; retry"),
    "40P01": (grpc.StatusCode.ABORTED, "a concurrent write conflicted; retry"),
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
    if (fault := database_fault(exc)) is not None:
        return grpc.StatusCode.UNAVAILABLE, f"{fault}; retry"
    return grpc.StatusCode.INTERNAL, "internal error"
