"""The shape every MemoryService handler shares, in one place: refuse when memory is disabled,
validate the scope, give the handler the request with field readers that validate as they read
and the call's time budget, and map whatever the domain raises to a gRPC status.

A handler is then only what differs: which fields it reads, which domain call it makes, and the
response it builds. Anything the status table (api.errors) does not know escapes to the edge
interceptor, which logs it once with the request id and answers INTERNAL."""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

import grpc
from google.protobuf.timestamp_pb2 import Timestamp

from memory_server import logs
from memory_server.api import validation as v
from memory_server.api.errors import to_status
from memory_server.memory.conversation.model import PageRequest
from memory_server.memory.errors import Disabled
from memory_server.memory.identity import Scope
from memory_server.memory.turn.turns import Turns
from memory_server.settings import Settings

log = logging.getLogger(__name__)

Req = TypeVar("Req")
Resp = TypeVar("Resp")


class Backend(Protocol):
    """What `rpc` reaches through the servicer: its settings, and the turns
    (the property raises Disabled when memory is off)."""

    _settings: Settings

    @property
    def _memory(self) -> Turns: ...


class _Fields(Generic[Req]):
    """A request's fields, read through validators, and the call's time budget."""

    __slots__ = ("budget_s", "request", "_settings")

    def __init__(self, request: Req, budget_s: float, settings: Settings) -> None:
        self.request = request
        # Seconds left for the work: the client's deadline, capped by request_timeout_seconds.
        self.budget_s = budget_s
        self._settings = settings

    def _field(self, name: str) -> Any:
        return getattr(self.request, name)

    def id(self, name: str, *, required: bool = True) -> str:
        return v.identifier(name, self._field(name), required=required)

    def text(self, name: str, max_chars: int) -> str:
        return v.short_text(name, self._field(name), max_chars)

    def content(self, name: str, *, required: bool = True) -> str:
        return v.content(
            name, self._field(name), self._settings.max_message_bytes, required=required
        )

    def page_size(self, page: tuple[int, int]) -> int:
        """`page_size`, defaulted and capped by (default, maximum)."""
        return v.page_size("page_size", self._field("page_size"), *page)

    def page(self, limits: tuple[int, int], max_bytes: int | None = None) -> PageRequest:
        """The page `page_size` (limited by (default, maximum)) and `page_token` ask for."""
        return PageRequest(self.page_size(limits), self._field("page_token"), max_bytes)

    def time(self, name: str) -> datetime | None:
        return time_field(name, self.request, name)


class Call(_Fields[Req]):
    """One request of one scope (username, graphname) as a handler sees it."""

    __slots__ = ("scope",)

    def __init__(self, request: Req, scope: Scope, budget_s: float, settings: Settings) -> None:
        super().__init__(request, budget_s, settings)
        self.scope = scope


class GraphCall(_Fields[Req]):
    """One request about a whole graph, across its users (the admin feedback export)."""

    __slots__ = ("graphname",)

    def __init__(self, request: Req, graphname: str, budget_s: float, settings: Settings) -> None:
        super().__init__(request, budget_s, settings)
        self.graphname = graphname


def time_field(field: str, message: Any, name: str) -> datetime | None:
    """The message's Timestamp field `name`, validated; None when it is not set."""
    if not message.HasField(name):
        return None
    value: Timestamp = getattr(message, name)
    return v.timestamp(field, value.seconds, value.nanos)


Handler = Callable[[Any, Call[Req]], Awaitable[Resp]]
GraphHandler = Callable[[Any, GraphCall[Req]], Awaitable[Resp]]
Method = Callable[[Any, Req, grpc.aio.ServicerContext], Awaitable[Resp]]


def rpc(handler: Handler[Req, Resp]) -> Method[Req, Resp]:
    """Turns `handler(self, call)` into the servicer method grpc calls: the request's
    username and graphname are validated into the call's scope."""

    def make(self: Backend, request: Any, context: grpc.aio.ServicerContext) -> Call[Req]:
        scope = v.scope(request.username, request.graphname)
        logs.scope_hash.set(scope.scope_hash)
        return Call(request, scope, _budget_s(self._settings, context), self._settings)

    return _method(handler, make)


def graph_rpc(handler: GraphHandler[Req, Resp]) -> Method[Req, Resp]:
    """`rpc` for a request that names a graph and no user."""

    def make(self: Backend, request: Any, context: grpc.aio.ServicerContext) -> GraphCall[Req]:
        graphname = v.identifier("graphname", request.graphname)
        return GraphCall(request, graphname, _budget_s(self._settings, context), self._settings)

    return _method(handler, make)


def _method(
    handler: Callable[[Any, Any], Awaitable[Resp]],
    make: Callable[[Backend, Any, grpc.aio.ServicerContext], object],
) -> Method[Req, Resp]:
    @functools.wraps(handler)
    async def method(self: Backend, request: Req, context: grpc.aio.ServicerContext) -> Resp:
        try:
            self._memory  # noqa: B018 - a disabled server refuses before looking at the input
            return await handler(self, make(self, request, context))
        except grpc.aio.AbortError:
            raise
        except Exception as exc:
            code, message = to_status(exc)
            if code is grpc.StatusCode.INTERNAL:
                raise
            if code is grpc.StatusCode.DEADLINE_EXCEEDED:
                log.info("%s: %s", handler.__name__, message)
            await context.abort(code, message)
            raise AssertionError("unreachable") from exc

    return method


def _budget_s(settings: Settings, context: grpc.aio.ServicerContext) -> float:
    remaining = context.time_remaining()
    limit = settings.request_timeout_seconds
    return limit if remaining is None else max(0.001, min(remaining, limit))


NO_MEMORY = "memory is disabled on this server (memory_config.enabled is false)"
NO_LONG_TERM = "long-term memory is disabled on this server"
Part = TypeVar("Part")


def enabled(part: Part | None, disabled: str) -> Part:
    """The part of memory an RPC uses; FAILED_PRECONDITION (Disabled) when it is switched off."""
    if part is None:
        raise Disabled(disabled)
    return part
