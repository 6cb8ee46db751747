"""A client's settings, checked once in its constructor: the default deadline, the retry budget,
TLS credentials, the bearer-token metadata and the channel options, and the channel made from
them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import grpc

__all__ = ["DEFAULT_OPTIONS", "ClientConfig", "client_config", "open_channel"]

_MAX_MESSAGE_BYTES = 64 * 1024 * 1024

DEFAULT_OPTIONS: tuple[tuple[str, Any], ...] = (
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.max_send_message_length", _MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", _MAX_MESSAGE_BYTES),
    # gRPC waits 1 s (growing to 120 s) before reconnecting after a refused connection, and fails
    # every call fast meanwhile; shorter waits give the UNAVAILABLE retries something to reach.
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 5_000),
)


@dataclass(frozen=True)
class ClientConfig:
    target: str
    timeout_s: float
    retries: int
    backoff_s: float
    credentials: Any  # grpc.ChannelCredentials | None
    metadata: tuple[tuple[str, str], ...]
    options: tuple[tuple[str, Any], ...]


def client_config(
    target: str,
    timeout_s: float,
    retries: int,
    backoff_s: float,
    tls: bool | grpc.ChannelCredentials,
    root_certificates: bytes | None,
    token: str | None,
    options: Sequence[tuple[str, Any]],
) -> ClientConfig:
    if timeout_s <= 0:
        raise ValueError("timeout_s must be positive")
    if retries < 0 or backoff_s < 0:
        raise ValueError("retries and backoff_s must not be negative")
    credentials: Any = None
    if isinstance(tls, grpc.ChannelCredentials):
        credentials = tls
    elif tls:
        credentials = grpc.ssl_channel_credentials(root_certificates=root_certificates)
    elif root_certificates is not None:
        raise ValueError("root_certificates needs tls=True")
    metadata = (("authorization", f"Bearer {token}"),) if token else ()
    merged = dict(DEFAULT_OPTIONS)
    merged.update(dict(options))
    return ClientConfig(
        target, timeout_s, retries, backoff_s, credentials, metadata, tuple(merged.items())
    )


def open_channel(flavour: Any, config: ClientConfig) -> Any:
    """A channel from `flavour`, the module `grpc` or `grpc.aio`: they name their channel
    factories, and the factories' arguments, alike."""
    if config.credentials is None:
        return flavour.insecure_channel(config.target, options=config.options)
    return flavour.secure_channel(config.target, config.credentials, options=config.options)
