"""Client package for the graphrag-memory service: typed clients in memory_client.client, generated
stubs in memory_client.v1."""

from memory_client.client import DEFAULT_OPTIONS, SERVICE_NAME, AsyncMemoryClient, MemoryClient
from memory_client.errors import (
    DeadlineExceededError,
    InvalidArgumentError,
    MemoryClientError,
    NotFoundError,
    UnavailableError,
)

__all__ = [
    "DEFAULT_OPTIONS",
    "SERVICE_NAME",
    "AsyncMemoryClient",
    "DeadlineExceededError",
    "InvalidArgumentError",
    "MemoryClient",
    "MemoryClientError",
    "NotFoundError",
    "UnavailableError",
]
