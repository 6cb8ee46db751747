"""The edge's cross-cutting work, for every RPC, in this order:

1. **Request id**: the caller's `x-request-id` metadata (printable, at most 128 characters) or a
   new one; it is in the contextvars for every log record of the call and goes back to the
   caller as trailing metadata.
2. **Authentication** (when `auth_token` is set): `authorization: Bearer <token>` must match one
   of the configured tokens, compared in constant time; otherwise UNAUTHENTICATED. The health
   service stays open, so probes need no token.
3. **Decoding**: the request's bytes are parsed here, so bytes that are not the method's
   message (a string field that is not UTF-8, a truncated message) answer INVALID_ARGUMENT.
4. **Unmapped exceptions**: anything the servicer did not map to a status is a bug: logged once
   with its traceback and request id, answered INTERNAL "internal error (request id ...)".
5. **Metrics** and, with `tracing`, an OpenTelemetry server span (the caller's `traceparent` is
   honoured): method, status and latency of every unary RPC.
6. **Shutdown**: from SIGTERM on, a new call (but a health check) answers UNAVAILABLE, and so
   does one still running when the grace period is nearly over (`memory_server.api.draining`):
   never CANCELLED.

Wrapped handlers are built once per method and cached: the per-call cost is the wrapper itself.
"""

from __future__ import annotations

import asyncio
import hmac
import itertools
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, NoReturn

import grpc

from memory_server import logs
from memory_server.api.draining import SHUTTING_DOWN, InFlight
from memory_server.metrics import Metrics

log = logging.getLogger(__name__)

HEALTH_PREFIX = "/grpc.health.v1.Health/"
REQUEST_ID_KEY = "x-request-id"
_MAX_REQUEST_ID = 128
# Requests larger than this are parsed on a worker thread.
_INLINE_DECODE_BYTES = 1024 * 1024


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
        #: The unary calls being served; `drain()` answers them UNAVAILABLE at shutdown.
        self.in_flight = InFlight()

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
        # The wrapped handler takes and returns bytes: decoding here, not in grpc, turns an
        # undecodable request into INVALID_ARGUMENT (grpc would answer UNKNOWN with a traceback).
        guarded = bool(self._tokens) and not method.startswith(HEALTH_PREFIX)
        codec = _Codec(handler.request_deserializer, handler.response_serializer)
        name = method.rsplit("/", 1)[-1]
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                self._unary(method, name, guarded, codec, handler.unary_unary)
            )
        if handler.stream_stream is not None:  # server reflection
            return grpc.stream_stream_rpc_method_handler(
                self._stream_stream(method, guarded, codec, handler.stream_stream)
            )
        if handler.unary_stream is not None:  # health Watch
            return grpc.unary_stream_rpc_method_handler(
                self._unary_stream(method, guarded, codec, handler.unary_stream)
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

    @staticmethod
    async def _internal(method: str, context: grpc.aio.ServicerContext) -> NoReturn:
        """An exception nothing mapped: a bug. Logged here, once, with its traceback; the caller
        gets the request id to quote, never the exception's text."""
        request_id = logs.request_id.get()
        log.exception("%s failed (request id %s)", method, request_id)
        await context.abort(grpc.StatusCode.INTERNAL, f"internal error (request id {request_id})")
        raise AssertionError("unreachable")

    def _unary(
        self,
        method: str,
        name: str,
        guarded: bool,
        codec: _Codec,
        behavior: Callable[..., Awaitable[Any]],
    ) -> Callable[[bytes, grpc.aio.ServicerContext], Awaitable[bytes]]:
        async def serve(raw: bytes, context: grpc.aio.ServicerContext) -> bytes:
            started = time.perf_counter()
            code = "OK"
            span: Any = None
            if self._tracer is not None:
                span = self._start_span(method, context)
            task = self.in_flight.enter()
            try:
                if self.in_flight.refusing and not method.startswith(HEALTH_PREFIX):
                    await context.abort(grpc.StatusCode.UNAVAILABLE, SHUTTING_DOWN)
                await self._admit(method, guarded, context)
                request = await codec.decode(raw, context)
                return codec.encode(await behavior(request, context))
            except grpc.aio.AbortError:
                status = context.code()
                code = status.name if isinstance(status, grpc.StatusCode) else "UNKNOWN"
                raise
            except Exception:
                code = "INTERNAL"
                await self._internal(method, context)
            except BaseException:
                code = "CANCELLED"
                if self.in_flight.drained(task):
                    code = "UNAVAILABLE"
                    await context.abort(grpc.StatusCode.UNAVAILABLE, SHUTTING_DOWN)
                raise
            finally:
                self.in_flight.leave(task)
                self._metrics.rpc(name, code, time.perf_counter() - started)
                if span is not None:
                    self._end_span(span, code)

        return serve

    def _unary_stream(
        self, method: str, guarded: bool, codec: _Codec, behavior: Callable[..., AsyncIterator[Any]]
    ) -> Callable[[bytes, grpc.aio.ServicerContext], AsyncIterator[bytes]]:
        # grpc.aio treats a handler as streaming only when it is an async generator function.
        async def serve(raw: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
            async def responses() -> AsyncIterator[Any]:
                async for response in behavior(await codec.decode(raw, context), context):
                    yield response

            async for encoded in self._streamed(method, guarded, codec, context, responses()):
                yield encoded

        return serve

    def _stream_stream(
        self, method: str, guarded: bool, codec: _Codec, behavior: Callable[..., AsyncIterator[Any]]
    ) -> Callable[[AsyncIterator[bytes], grpc.aio.ServicerContext], AsyncIterator[bytes]]:
        async def serve(
            raw_requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext
        ) -> AsyncIterator[bytes]:
            async def requests() -> AsyncIterator[Any]:
                async for raw in raw_requests:
                    yield await codec.decode(raw, context)

            responses = behavior(requests(), context)
            async for encoded in self._streamed(method, guarded, codec, context, responses):
                yield encoded

        return serve

    async def _streamed(
        self,
        method: str,
        guarded: bool,
        codec: _Codec,
        context: grpc.aio.ServicerContext,
        responses: AsyncIterator[Any],
    ) -> AsyncIterator[bytes]:
        """A streaming call's responses, encoded, once the call is admitted (the generators
        above start their work only when this one first asks them for a response)."""
        try:
            await self._admit(method, guarded, context)
            async for response in responses:
                yield codec.encode(response)
        except grpc.aio.AbortError:
            raise
        except Exception:
            await self._internal(method, context)

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


class _Codec:
    """A method's request decoder and response encoder (protobuf's, from the handler)."""

    def __init__(
        self,
        deserializer: Callable[[bytes], Any] | None,
        serializer: Callable[[Any], bytes] | None,
    ) -> None:
        self._deserialize = deserializer
        self._serialize = serializer
        message_type = getattr(deserializer, "__self__", None)
        descriptor = getattr(message_type, "DESCRIPTOR", None)
        self._type_name: str = getattr(descriptor, "name", "") or "request message"

    async def decode(self, raw: bytes, context: grpc.aio.ServicerContext) -> Any:
        if self._deserialize is None:
            return raw
        try:
            if len(raw) <= _INLINE_DECODE_BYTES:
                return self._deserialize(raw)
            # A 60 MiB import parses in tens of milliseconds: not on the loop's own time.
            return await asyncio.to_thread(self._deserialize, raw)
        except Exception as exc:  # DecodeError: invalid UTF-8, truncated, not this message
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"request is not a valid {self._type_name}: {exc}",
            )

    def encode(self, response: Any) -> bytes:
        return response if self._serialize is None else self._serialize(response)
