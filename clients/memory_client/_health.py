"""grpc.health.v1.Health as the client calls it: the standard method paths, with the client's
own copy of the messages (memory_client.v1.health_pb2: the same bytes on the wire).

Not grpcio-health-checking's stubs: that package pins grpcio to its own version, so depending
on it would upgrade the grpcio of an application that pins an older one (GraphRAG pins 1.73.1).
The server serves the standard service with grpcio-health-checking."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from google.protobuf.message import Message

from memory_client.v1.health_pb2 import HealthCheckRequest, HealthCheckResponse

__all__ = [
    "HEALTH_SERVICE",
    "METHODS",
    "HealthCheckRequest",
    "HealthCheckResponse",
    "HealthMethod",
    "HealthStub",
    "serving",
]

HEALTH_SERVICE = "grpc.health.v1.Health"


@dataclass(frozen=True, slots=True)
class HealthMethod:
    """One method of grpc.health.v1.Health, as a generated descriptor would describe it."""

    name: str
    request_class: type[Message]
    response_class: type[Message]
    server_streaming: bool

    @property
    def path(self) -> str:
        return f"/{HEALTH_SERVICE}/{self.name}"


METHODS = (
    HealthMethod("Check", HealthCheckRequest, HealthCheckResponse, server_streaming=False),
    HealthMethod("Watch", HealthCheckRequest, HealthCheckResponse, server_streaming=True),
)


class HealthStub:
    """The client side of grpc.health.v1.Health on a grpc or grpc.aio channel, shaped like a
    generated stub (`Check`, `Watch`)."""

    def __init__(self, channel: Any) -> None:
        for method in METHODS:
            factory = channel.unary_stream if method.server_streaming else channel.unary_unary
            callable_ = factory(
                method.path,
                request_serializer=method.request_class.SerializeToString,
                response_deserializer=method.response_class.FromString,
            )
            setattr(self, method.name, callable_)


def serving(response: Any) -> bool:
    """True when a Check response says SERVING."""
    return bool(response.status == HealthCheckResponse.SERVING)
