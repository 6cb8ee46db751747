"""The load run: `concurrency` workers on one event loop (grpc.aio), spread round-robin over
`connections` channels, each taking the next request number until `total` calls are made or
`duration` has passed (calls in flight then are allowed to finish and are counted)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import json_format, message_factory
from google.protobuf.message import Message

from memory_client import _health
from memory_client.loadtest.report import Collector, Result, build_report, ghz_options
from memory_client.loadtest.template import CallInfo, TemplateError, check_data, render
from memory_client.v1 import memory_pb2


class LoadTestError(Exception):
    """A problem with the run's options (exit status 1, message on stderr)."""


@dataclass
class Options:
    call: str
    host: str = "127.0.0.1:50051"
    concurrency: int = 50
    total: int = 200
    duration_s: float = 0.0  # when set, `total` is ignored (as in ghz)
    data: Any = None
    metadata: dict[str, str] | None = None
    insecure: bool = True
    cacert: str = ""
    connections: int = 1
    timeout_s: float = 20.0  # per call; 0 means none
    connect_timeout_s: float = 10.0
    name: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ResolvedCall:
    path: str  # "/package.Service/Method"
    info: CallInfo
    request_class: type[Message]
    response_class: type[Message]


@dataclass(frozen=True, slots=True)
class _Method:
    service: str  # full name, "package.Service"
    name: str
    request_class: type[Message]
    response_class: type[Message]
    streaming: bool


def _methods() -> list[_Method]:
    """Every method the tool knows: the memory service's, from its descriptors, and
    grpc.health.v1.Health's (memory_client._health: our messages on the standard paths)."""
    found = [
        _Method(
            service.full_name,
            method.name,
            message_factory.GetMessageClass(method.input_type),
            message_factory.GetMessageClass(method.output_type),
            method.client_streaming or method.server_streaming,
        )
        for service in memory_pb2.DESCRIPTOR.services_by_name.values()
        for method in service.methods
    ]
    found += [
        _Method(
            _health.HEALTH_SERVICE, h.name, h.request_class, h.response_class, h.server_streaming
        )
        for h in _health.METHODS
    ]
    return found


def resolve_call(call: str) -> ResolvedCall:
    """ "pkg.Service/Method" or "pkg.Service.Method" (ghz's two spellings) among the memory
    service and grpc.health.v1.Health; a bare "Method" or "Service/Method" when unambiguous."""
    text = call.strip().lstrip("/")
    if "/" in text:
        service_name, _, method_name = text.rpartition("/")
    else:
        service_name, _, method_name = text.rpartition(".")
    known = _methods()
    matches = [
        m
        for m in known
        if m.name == method_name
        and (not service_name or service_name in (m.service, m.service.rpartition(".")[2]))
    ]
    if len(matches) != 1:
        names = sorted(f"{m.service}/{m.name}" for m in known)
        what = "is ambiguous" if matches else "is not a known method"
        raise LoadTestError(f"call {call!r} {what}; known calls: {', '.join(names)}")
    method = matches[0]
    if method.streaming:
        raise LoadTestError(f"call {call!r} is streaming; only unary calls are supported")
    return ResolvedCall(
        path=f"/{method.service}/{method.name}",
        info=CallInfo(
            fully_qualified_name=f"{method.service}.{method.name}",
            method_name=method.name,
            service_name=method.service,
            input_name=method.request_class.DESCRIPTOR.name,
            output_name=method.response_class.DESCRIPTOR.name,
        ),
        request_class=method.request_class,
        response_class=method.response_class,
    )


def status_name(code: grpc.StatusCode) -> str:
    """Go's spelling of a status code, as ghz reports it: INVALID_ARGUMENT → InvalidArgument."""
    name: str = code.name
    return "OK" if name == "OK" else "".join(part.capitalize() for part in name.split("_"))


def worker_id(index: int, connections: int) -> str:
    """ghz's worker ids: g<worker>c<connection>."""
    return f"g{index}c{index % connections}"


def build_request(resolved: ResolvedCall, data: Any, number: int, worker: str) -> Message:
    request = resolved.request_class()
    if data is not None:
        json_format.ParseDict(render(data, resolved.info, number, worker), request)
    return request


def _channel(options: Options) -> grpc.aio.Channel:
    if options.insecure and not options.cacert:
        return grpc.aio.insecure_channel(options.host)
    root = Path(options.cacert).read_bytes() if options.cacert else None
    return grpc.aio.secure_channel(options.host, grpc.ssl_channel_credentials(root))


async def run(options: Options) -> dict[str, Any]:
    """Runs the load and returns the ghz-format report."""
    resolved = _checked(options)
    channels = [_channel(options) for _ in range(options.connections)]
    try:
        for channel in channels:
            try:
                await asyncio.wait_for(channel.channel_ready(), options.connect_timeout_s)
            except TimeoutError as exc:
                raise LoadTestError(
                    f"could not connect to {options.host} within {options.connect_timeout_s:g}s"
                ) from exc
        load = _Load(options, resolved, channels)
        await asyncio.gather(*(load.worker(i) for i in range(options.concurrency)))
        total_ns = time.perf_counter_ns() - load.began
    finally:
        for channel in channels:
            await channel.close()
    timed = options.duration_s > 0
    return build_report(
        load.collector.results,
        options=ghz_options(
            host=options.host,
            call=resolved.path.lstrip("/"),
            insecure=options.insecure,
            total=0 if timed else options.total,
            concurrency=options.concurrency,
            connections=options.connections,
            duration_ns=int(options.duration_s * 1e9),
            timeout_ns=int(options.timeout_s * 1e9),
            data=options.data,
            name=options.name,
            metadata=options.metadata,
        ),
        total_ns=total_ns,
        end_reason="timeout" if timed else "normal",
        name=options.name,
    )


def _checked(options: Options) -> ResolvedCall:
    """The call the options name, once they and its data are known to make sense."""
    if options.concurrency < 1:
        raise LoadTestError("concurrency must be at least 1")
    if options.connections < 1:
        raise LoadTestError("connections must be at least 1")
    if options.connections > options.concurrency:
        raise LoadTestError("connections must not exceed concurrency")
    if options.duration_s <= 0 and options.total < 1:
        raise LoadTestError("total must be at least 1 (or give a duration)")
    if options.duration_s <= 0 and options.total < options.concurrency:
        raise LoadTestError("total must not be smaller than concurrency")
    resolved = resolve_call(options.call)
    if options.data is not None:
        try:
            check_data(options.data)
            build_request(resolved, options.data, 0, worker_id(0, options.connections))
        except (TemplateError, json_format.ParseError) as exc:
            raise LoadTestError(f"bad call data: {exc}") from exc
    return resolved


class _Load:
    """The workers' shared state: request numbers handed out until the total or the duration
    is reached, each worker on its connection (worker i on channel i mod connections)."""

    def __init__(
        self, options: Options, resolved: ResolvedCall, channels: list[grpc.aio.Channel]
    ) -> None:
        self._options = options
        self._resolved = resolved
        self._methods: list[Callable[..., Any]] = [
            channel.unary_unary(
                resolved.path,
                request_serializer=resolved.request_class.SerializeToString,
                response_deserializer=resolved.response_class.FromString,
            )
            for channel in channels
        ]
        self._metadata = tuple(options.metadata.items()) if options.metadata else None
        self._timeout = options.timeout_s if options.timeout_s > 0 else None
        self.collector = Collector()
        self._next_number = 0
        self.began = time.perf_counter_ns()
        self._deadline = (
            self.began + int(options.duration_s * 1e9) if options.duration_s > 0 else None
        )

    def _take(self) -> int | None:
        if self._deadline is not None:
            if time.perf_counter_ns() >= self._deadline:
                return None
        elif self._next_number >= self._options.total:
            return None
        number = self._next_number
        self._next_number += 1
        return number

    async def worker(self, index: int) -> None:
        method = self._methods[index % len(self._methods)]
        wid = worker_id(index, self._options.connections)
        while (number := self._take()) is not None:
            stamp = datetime.now(UTC)
            start = time.perf_counter_ns()
            try:
                request = build_request(self._resolved, self._options.data, number, wid)
            except (TemplateError, json_format.ParseError) as exc:
                self.collector.add(
                    Result(stamp, time.perf_counter_ns() - start, "Unknown", str(exc))
                )
                continue
            try:
                await method(request, timeout=self._timeout, metadata=self._metadata)
            except grpc.aio.AioRpcError as exc:
                code = status_name(exc.code())
                error = f"rpc error: code = {code} desc = {exc.details()}"
                self.collector.add(Result(stamp, time.perf_counter_ns() - start, code, error))
            else:
                self.collector.add(Result(stamp, time.perf_counter_ns() - start, "OK"))
