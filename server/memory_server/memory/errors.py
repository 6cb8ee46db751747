"""Domain errors. The gRPC edge maps each class to one status code (api/errors.py)."""

from __future__ import annotations


class MemoryServiceError(Exception):
    """Base class of every error the service raises on purpose."""


class InvalidArgument(MemoryServiceError):
    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field


class NotFound(MemoryServiceError):
    """The thing does not exist in the caller's scope (other scopes' ids look the same)."""


class AlreadyExists(MemoryServiceError):
    pass


class Overloaded(MemoryServiceError):
    """A bounded queue is full; the caller may retry later."""


class Disabled(MemoryServiceError):
    """Memory is switched off by configuration."""


class Unavailable(MemoryServiceError):
    """The service is shutting down or a dependency is unreachable; retry elsewhere or later."""
