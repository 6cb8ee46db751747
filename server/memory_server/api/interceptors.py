"""The edge's cross-cutting work, for every RPC, in this order:

1. **Request id**: the caller's `x-request-id` metadata (printable, at most 128 characters) or a
   new one; it is in the contextvars for every log record of the call and goes back to the
   caller as trailing metadata.
2. **Authentication** (when `auth_token` is set): `authorization: Bearer <token>` must match one
   of the configured tokens, compared in constant time; otherwise UNAUTHENTICATED. The health
   service stays open, so probes need no token.
3. **Metrics** and, with `tracing`, an OpenTelemetry server span (the caller's `traceparent` is
   honoured): method, status and latency of every unary RPC.

Wrapped handlers are built once per method and cached: the per-call cost is the wrapper itself.
"""

from __future__ import annotations

import hmac
import itertools
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import grpc

from memory_server import logs
from memory_server.metrics import Metrics

log = logging.getLogger(__name__)

HEALTH_PREFIX = "/grpc.health.v1.Health/"
REQUEST_ID_KEY = "x-request-id"
_MAX_REQUEST_ID = 128


# A new request id is this process's random prefix and a counter: unique across replicas and
# restarts without drawing randomness on every call.
_PROCESS_PREFIX = os.urandom(6).hex()
_SEQUENCE = itertools.count(1)


def _caller_request_id(metadata: Sequence[tuple[str, Any]]) -> str:
    for key, value in metadata:
        if key == REQUEST_ID_KEY and isinstance(value, str):
            if 0 < len(value) <= _MAX_REQUEST_ID and value.isprintable():
                return value
            break
    return f"{_PROCESS_PREFIX}-{next(_SEQUENCE):x}"


def _bearer(metadata: Sequence[tuple[str, Any]]) -> str | None:
    for key, value in metadata:
        if key == "authorization" and isinstance(value, str):
            scheme, _, credentials = value.partition(" ")
            return credentials.strip() if scheme.lower() == "bearer" else None
    return None


class _Tokens:
    """The accepted bearer tokens (several, so one can be rotated without downtime)."""

    def __init__(self, configured: str) -> None:
        self._tokens = [t.strip().encode() for t in configured.split(",") if t.strip()]

    def __bool__(self) -> bool:
        return bool(self._tokens)

    def accept(self, presented: str | None) -> bool:
        if presented is None:
            return False
        given = presented.encode()
        # Compare with every token, so the time taken does not say which one nearly matched.
        matches = [hmac.compare_digest(given, token) for token in self._tokens]
        return any(matches)


class EdgeInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    def __init__(self, *, metrics: Metrics, auth_token: str = "", tracing: bool = False) -> None:
        self._metrics = metrics
        self._tokens = _Tokens(auth_token)
        self._tracer: Any = None
        self._propagate: Any = None
        if tracing:
            try:
                from opentelemetry import propagate, trace
            except ImportError as exc:
                raise RuntimeError(
                    "tracing needs the OpenTelemetry API: pip install 'graphrag-memory[tracing]'"
                ) from exc

            self._tracer = trace.get_tracer("memory_server")
            self._propagate = propagate
        self._wrapped: dict[str, grpc.RpcMethodHandler] = {}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        method: str = handler_call_details.method
        cached = self._wrapped.get(method)
        if cached is not None:
            return cached
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        wrapped = self._wrap(method, handler)
        self._wrapped[method] = wrapped
        return wrapped

    def _wrap(self, method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        guarded = bool(self._tokens) and not method.startswith(HEALTH_PREFIX)
        name = method.rsplit("/", 1)[-1]
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                self._unary(method, name, guarded, handler.unary_unary),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.stream_stream is not None:  # server reflection
            return grpc.stream_stream_rpc_method_handler(
                self._stream(method, guarded, handler.stream_stream),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream is not None:  # health Watch
            return grpc.unary_stream_rpc_method_handler(
                self._stream(method, guarded, handler.unary_stream),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return handler

    async def _admit(self, method: str, guarded: bool, context: grpc.aio.ServicerContext) -> None:
        """Sets the call's ids and refuses it when it is not authenticated."""
        metadata = context.invocation_metadata() or ()
        request_id = _caller_request_id(metadata)
        logs.request_id.set(request_id)
        logs.rpc_method.set(method)
        context.set_trailing_metadata(((REQUEST_ID_KEY, request_id),))
        if guarded and not self._tokens.accept(_bearer(metadata)):
            # Never log what was presented: it may be a real token sent to the wrong server.
            log.info("%s refused: no valid bearer token (peer %s)", method, context.peer())
            await context.abort(
                grpc.StatusCode.UNAUTHENTICATED,
                "authentication required: send 'authorization: Bearer <token>' metadata",
                trailing_metadata=((REQUEST_ID_KEY, request_id),),
            )

    def _unary(
        self, method: str, name: str, guarded: bool, behavior: Callable[..., Awaitable[Any]]
    ) -> Callable[[Any, grpc.aio.ServicerContext], Awaitable[Any]]:
        async def serve(request: Any, context: grpc.aio.ServicerContext) -> Any:
            started = time.perf_counter()
            code = "OK"
            span: Any = None
            if self._tracer is not None:
                span = self._start_span(method, context)
            try:
                await self._admit(method, guarded, context)
                return await behavior(request, context)
            except grpc.aio.AbortError:
                status = context.code()
                code = status.name if isinstance(status, grpc.StatusCode) else "UNKNOWN"
                raise
            except BaseException as exc:
                # grpc answers UNKNOWN for an exception; a cancelled call is CANCELLED.
                code = "UNKNOWN" if isinstance(exc, Exception) else "CANCELLED"
                raise
            finally:
                self._metrics.rpc(name, code, time.perf_counter() - started)
                if span is not None:
                    self._end_span(span, code)

        return serve

    def _stream(
        self, method: str, guarded: bool, behavior: Callable[..., AsyncIterator[Any]]
    ) -> Callable[[Any, grpc.aio.ServicerContext], AsyncIterator[Any]]:
        async def serve(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            await self._admit(method, guarded, context)
            async for response in behavior(request, context):
                yield response

        return serve

    def _start_span(self, method: str, context: grpc.aio.ServicerContext) -> Any:
        from opentelemetry.trace import SpanKind

        carrier = {k: v for k, v in (context.invocation_metadata() or ()) if isinstance(v, str)}
        service, _, rpc_name = method.lstrip("/").rpartition("/")
        return self._tracer.start_span(
            method.lstrip("/"),
            context=self._propagate.extract(carrier),
            kind=SpanKind.SERVER,
            attributes={"rpc.system": "grpc", "rpc.service": service, "rpc.method": rpc_name},
        )

    @staticmethod
    def _end_span(span: Any, code: str) -> None:
        from opentelemetry.trace import Status, StatusCode

        span.set_attribute("rpc.grpc.status_code", grpc.StatusCode[code].value[0])
        if code != "OK":
            span.set_status(Status(StatusCode.ERROR, code))
        span.end()
