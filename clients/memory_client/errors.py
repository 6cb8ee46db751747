"""Errors raised by the memory clients: every failed RPC becomes a MemoryClientError."""

from __future__ import annotations

import grpc


class MemoryClientError(Exception):
    """An RPC failed. `code` is the gRPC status, `details` the server's (or gRPC's) message,
    `method` the RPC's name ("StartTurn", "HealthCheck", …)."""

    def __init__(self, code: grpc.StatusCode, details: str, method: str) -> None:
        super().__init__(f"{method} failed: {code.name}: {details}")
        self.code = code
        self.details = details
        self.method = method


class InvalidArgumentError(MemoryClientError):
    """INVALID_ARGUMENT: the request is malformed; the details name the field."""


class NotFoundError(MemoryClientError):
    """NOT_FOUND: no such conversation, message or fact in this scope."""


class UnavailableError(MemoryClientError):
    """UNAVAILABLE: the server (or its database) could not be reached, after any retries."""


class DeadlineExceededError(MemoryClientError):
    """DEADLINE_EXCEEDED: the call ran out of its time budget."""


_BY_CODE: dict[grpc.StatusCode, type[MemoryClientError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgumentError,
    grpc.StatusCode.NOT_FOUND: NotFoundError,
    grpc.StatusCode.UNAVAILABLE: UnavailableError,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceededError,
}


def error_for(code: grpc.StatusCode, details: str, method: str) -> MemoryClientError:
    """The most specific MemoryClientError for a status code."""
    return _BY_CODE.get(code, MemoryClientError)(code, details, method)
