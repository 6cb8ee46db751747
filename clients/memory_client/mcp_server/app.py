"""The MCP server over its two transports: stdio, serving the one caller its configuration names,
and streamable HTTP, where every request must authenticate (memory_client.mcp_server.callers)
before MCP sees it.

HTTP runs stateless with JSON answers: each POST stands alone, so any replica behind a load
balancer answers any request, and the caller is read from that request's own headers (the SDK's
1.x stateful sessions keep the first request's context; python-sdk#2208). `GET /healthz`
answers without authentication: 200 while the memory service reports SERVING, else 503.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from memory_client.client import AsyncMemoryClient
from memory_client.errors import MemoryClientError
from memory_client.mcp_server.callers import Caller, Identify
from memory_client.mcp_server.tools import Memory, register

__all__ = ["HttpOptions", "build_server", "http_app", "run_stdio"]

INSTRUCTIONS = (
    "Long-term memory of the user you are talking to (graphrag-memory): facts about them and "
    "their world, and what was said in their earlier conversations. Search it before "
    "answering what it may know; remember durable facts the user states; update or forget a "
    "fact by its fact_id when the user corrects it. Everything is scoped to the calling user."
)


def build_server(memory: Memory, *, host: str = "127.0.0.1", **http: Any) -> FastMCP:
    """The FastMCP server with the memory tools; `http` holds the streamable HTTP settings."""
    server = FastMCP(
        "graphrag-memory", instructions=INSTRUCTIONS, host=host, log_level="WARNING", **http
    )
    register(server, memory)
    return server


async def run_stdio(open_client: Callable[[], AsyncMemoryClient], caller: Caller) -> None:
    """Serves MCP over stdin/stdout for `caller` until the host closes the pipe."""
    memory = Memory(open_client, lambda ctx: caller)
    try:
        await build_server(memory).run_stdio_async()
    finally:
        await memory.close()


# Where the middleware leaves the request's caller in its ASGI scope, for the tools to read
# from the request MCP hands them (the same scope): each request is identified once.
_CALLER = "graphrag_memory.caller"
_CHALLENGE = 'Bearer realm="graphrag-memory"'


def _request_caller(ctx: Context[Any, Any, Any]) -> Caller:
    request = ctx.request_context.request
    found = request.scope.get(_CALLER) if isinstance(request, Request) else None
    if not isinstance(found, Caller):  # only through the middleware, which refuses none
        raise ToolError("UNAUTHENTICATED: no valid caller credentials")
    return found


class _Authenticated:
    """ASGI: an HTTP request to the MCP endpoint whose headers name no caller gets 401 before
    MCP reads it, any other carries its caller in its scope; `/healthz` and lifespan messages
    pass."""

    def __init__(self, app: ASGIApp, identify: Identify) -> None:
        self._app, self._identify = app, identify

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] != "/healthz":
            raw = scope["headers"]
            caller = self._identify(
                {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in raw}
            )
            if caller is None:
                refused = JSONResponse(
                    {"error": "unauthenticated", "detail": "no valid caller credentials"},
                    status_code=401,
                    headers={"WWW-Authenticate": _CHALLENGE},
                )
                await refused(scope, receive, send)
                return
            scope[_CALLER] = caller
        await self._app(scope, receive, send)


@dataclass(frozen=True, slots=True)
class HttpOptions:
    host: str
    path: str = "/mcp"
    # Host header values accepted (DNS-rebinding protection), e.g. "memory.internal:8080"; empty:
    # the SDK's default, on for a loopback `host` (its loopback names), off otherwise.
    allowed_hosts: Sequence[str] = ()


def http_app(
    open_client: Callable[[], AsyncMemoryClient], identify: Identify, options: HttpOptions
) -> ASGIApp:
    """The streamable HTTP app: MCP at `options.path` for authenticated callers, `/healthz`."""
    memory = Memory(open_client, _request_caller)
    security = None
    if options.allowed_hosts:
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=list(options.allowed_hosts),
            allowed_origins=[
                f"{scheme}://{h}" for h in options.allowed_hosts for scheme in ("http", "https")
            ],
        )
    server = build_server(
        memory,
        host=options.host,
        stateless_http=True,
        json_response=True,
        streamable_http_path=options.path,
        transport_security=security,
    )
    mcp_app = server.streamable_http_app()

    async def healthz(request: Request) -> Response:
        try:
            serving = await memory.client().health(timeout_s=2.0)
        except MemoryClientError as exc:
            return JSONResponse({"status": "NOT_SERVING", "detail": exc.code.name}, 503)
        status = "SERVING" if serving else "NOT_SERVING"
        return JSONResponse({"status": status}, 200 if serving else 503)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # A mounted app's own lifespan does not run: the session manager starts here.
        async with server.session_manager.run():
            try:
                yield
            finally:
                await memory.close()

    app = Starlette(routes=[Route("/healthz", healthz), Mount("/", app=mcp_app)], lifespan=lifespan)
    return _Authenticated(app, identify)
