"""The two ways a client talks to the server: over a grpc.aio channel, or a blocking grpc one.
Each owns its channel and stubs and runs one RPC under the deadline and retries of `Attempts`;
the RPCs themselves are written once, in memory_client.client."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Self

import grpc
from google.protobuf.message import Message

from memory_client._config import client_config, open_channel
from memory_client._health import HealthStub
from memory_client._retry import Attempts, RetryRule
from memory_client.v1 import memory_pb2_grpc as pb_grpc

__all__ = ["AsyncTransport", "RpcSpec", "SyncTransport", "Transport"]


@dataclass(frozen=True)
class RpcSpec:
    """What a transport needs to send an RPC: its name (the stub attribute), the service it is
    on, and whether a given request may be retried."""

    name: str
    service: Literal["memory", "health"]
    retry_if: RetryRule


class Transport:
    """The constructor both clients share: settings, channel and stubs."""

    # `grpc` or `grpc.aio`, whose channel factories take the same arguments.
    _flavour: ClassVar[Any]

    def __init__(
        self,
        target: str,
        *,
        timeout_s: float = 10.0,
        retries: int = 3,
        backoff_s: float = 0.1,
        tls: bool | grpc.ChannelCredentials = False,
        root_certificates: bytes | None = None,
        token: str | None = None,
        options: Sequence[tuple[str, Any]] = (),
    ) -> None:
        self._config = client_config(
            target, timeout_s, retries, backoff_s, tls, root_certificates, token, options
        )
        self._channel = open_channel(self._flavour, self._config)
        self._stubs: dict[str, Any] = {
            "memory": pb_grpc.MemoryServiceStub(self._channel),
            "health": HealthStub(self._channel),
        }

    def _start(
        self, rpc: RpcSpec, request: Message, timeout_s: float | None
    ) -> tuple[Any, Attempts]:
        """The stub method to call, and the retry plan of this call."""
        method = getattr(self._stubs[rpc.service], rpc.name)
        budget_s = timeout_s or self._config.timeout_s
        return method, Attempts(rpc.name, rpc.retry_if(request), budget_s, self._config)


class AsyncTransport(Transport):
    _flavour = grpc.aio

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._channel.close()

    async def _call(self, rpc: RpcSpec, request: Message, timeout_s: float | None) -> Any:
        method, attempts = self._start(rpc, request, timeout_s)
        metadata = self._config.metadata
        while True:
            try:
                return await method(request, timeout=attempts.timeout(), metadata=metadata)
            except grpc.aio.AioRpcError as exc:
                delay = attempts.backoff_after(exc)
            await asyncio.sleep(delay)


class SyncTransport(Transport):
    _flavour = grpc

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._channel.close()

    def _call(self, rpc: RpcSpec, request: Message, timeout_s: float | None) -> Any:
        method, attempts = self._start(rpc, request, timeout_s)
        metadata = self._config.metadata
        while True:
            try:
                return method(request, timeout=attempts.timeout(), metadata=metadata)
            except grpc.RpcError as exc:
                delay = attempts.backoff_after(exc)
            time.sleep(delay)
