"""`graphrag-memory-mcp`: the MCP server's command line. Every option also reads an environment
variable (shown in --help), so an MCP host's JSON config can set them either way.

    graphrag-memory-mcp --user alice --graph Finance                      # stdio, for one user
    graphrag-memory-mcp --transport http --listen 0.0.0.0:8765 --tokens-file tokens.json
    graphrag-memory-mcp --transport http --user-header X-Forwarded-User --graph Finance

A configuration it cannot serve stops it with one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from memory_client.mcp_server.callers import Caller, CallerError, HeaderCallers, TokenCallers

__all__ = ["main"]

ENV = "GRAPHRAG_MEMORY_MCP_"
DEFAULT_TARGET = "127.0.0.1:50051"
DEFAULT_LISTEN = "127.0.0.1:8765"


class ConfigError(ValueError):
    pass


def _parser(environ: Mapping[str, str]) -> argparse.ArgumentParser:
    def env(name: str, default: Any = None) -> Any:
        return environ.get(ENV + name, default)

    p = argparse.ArgumentParser(
        prog="graphrag-memory-mcp",
        description="MCP server (stdio or streamable HTTP) over the graphrag-memory service.",
    )
    p.add_argument(
        "--transport",
        choices=("stdio", "http"),
        default=env("TRANSPORT", "stdio"),
        help=f"${ENV}TRANSPORT (default stdio)",
    )
    service = p.add_argument_group("the memory service")
    service.add_argument(
        "--target",
        default=env("TARGET", DEFAULT_TARGET),
        metavar="HOST:PORT",
        help=f"gRPC address (${ENV}TARGET, default {DEFAULT_TARGET})",
    )
    service.add_argument(
        "--service-token",
        default=env("SERVICE_TOKEN"),
        help=f"the service's auth_token (${ENV}SERVICE_TOKEN)",
    )
    service.add_argument(
        "--tls",
        action="store_true",
        default=env("TLS", "").lower() in ("1", "true", "yes"),
        help=f"TLS to the service (${ENV}TLS=true)",
    )
    service.add_argument(
        "--ca-file",
        default=env("CA_FILE"),
        metavar="PEM",
        help=f"root certificates to trust, implies --tls (${ENV}CA_FILE)",
    )
    service.add_argument(
        "--timeout",
        type=float,
        default=env("TIMEOUT", "10"),  # a string default goes through `type` too
        help=f"seconds a tool waits for the service, retries included (${ENV}TIMEOUT, default 10)",
    )
    callers = p.add_argument_group("who is calling")
    callers.add_argument(
        "--user", default=env("USER"), help=f"stdio: the user this process serves (${ENV}USER)"
    )
    callers.add_argument(
        "--graph",
        action="append",
        default=None,
        help=f"stdio, or HTTP with --user-header: a graph the caller may use, "
        f"the first the default (${ENV}GRAPHS, comma-separated)",
    )
    callers.add_argument(
        "--tokens-file",
        default=env("TOKENS_FILE"),
        type=Path,
        help=f"HTTP: bearer tokens, each with its user and graphs (${ENV}TOKENS_FILE)",
    )
    callers.add_argument(
        "--user-header",
        default=env("USER_HEADER"),
        help=f"HTTP behind a trusted proxy: the header naming the user (${ENV}USER_HEADER)",
    )
    callers.add_argument(
        "--graphs-header",
        default=env("GRAPHS_HEADER"),
        help=f"with --user-header: the header listing the user's graphs (${ENV}GRAPHS_HEADER)",
    )
    http = p.add_argument_group("streamable HTTP")
    http.add_argument(
        "--listen",
        default=env("LISTEN", DEFAULT_LISTEN),
        metavar="HOST:PORT",
        help=f"${ENV}LISTEN (default {DEFAULT_LISTEN}; port 0: any free one)",
    )
    http.add_argument("--path", default=env("PATH", "/mcp"), help="the MCP endpoint's path")
    http.add_argument(
        "--allowed-host",
        action="append",
        default=None,
        help=f"a Host header to accept, e.g. memory.internal:8765 "
        f"(${ENV}ALLOWED_HOSTS, comma-separated)",
    )
    return p


def _listed(given: Sequence[str] | None, environ: Mapping[str, str], name: str) -> tuple[str, ...]:
    raw = list(given) if given else environ.get(ENV + name, "").split(",")
    return tuple(g.strip() for g in raw if g.strip())


def _identify(args: argparse.Namespace, graphs: tuple[str, ...]) -> TokenCallers | HeaderCallers:
    if (args.tokens_file is None) == (args.user_header is None):
        raise ConfigError("HTTP needs exactly one of --tokens-file and --user-header")
    if args.tokens_file is not None:
        return TokenCallers.from_file(args.tokens_file)
    if args.graphs_header is None and not graphs:
        raise ConfigError("--user-header needs --graph or --graphs-header")
    return HeaderCallers(args.user_header, args.graphs_header, graphs)


def _listen(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ConfigError(f"--listen: expected HOST:PORT, got {address!r}")
    return host.strip("[]"), int(port)


def _listening_socket(host: str, port: int) -> socket.socket:
    """Bound here so that port 0 can be reported. Made with IPPROTO_TCP, not 0 as
    socket.create_server makes it: asyncio turns Nagle off (TCP_NODELAY) only on connections of
    a socket whose proto says TCP, and with Nagle on every answer after the first on a
    kept-alive connection waited for the client's delayed ACK, 40 ms (measured with
    bench/mcp_overhead.py)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listening = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listening.bind((host, port))
        listening.listen(socket.SOMAXCONN)
    except OSError:
        listening.close()
        raise
    return listening


def _client_factory(args: argparse.Namespace) -> Any:
    from memory_client.client import AsyncMemoryClient

    if args.timeout <= 0:
        raise ConfigError("--timeout must be positive")
    root = None
    if args.ca_file:
        try:
            root = Path(args.ca_file).read_bytes()
        except OSError as exc:
            raise ConfigError(f"--ca-file: {exc}") from None

    def open_client() -> AsyncMemoryClient:
        return AsyncMemoryClient(
            args.target,
            timeout_s=args.timeout,
            tls=bool(args.tls or root),
            root_certificates=root,
            token=args.service_token,
        )

    return open_client


def _serve(args: argparse.Namespace, environ: Mapping[str, str]) -> None:
    try:
        import uvicorn

        from memory_client.mcp_server.app import HttpOptions, http_app, run_stdio
    except ImportError as exc:
        raise ConfigError(
            f"needs the mcp extra ({exc.name} is missing): "
            "pip install 'graphrag-memory-client[mcp]'"
        ) from None
    if args.transport not in ("stdio", "http"):  # from the environment: argparse checks flags
        raise ConfigError(f"transport: expected stdio or http, got {args.transport!r}")
    graphs = _listed(args.graph, environ, "GRAPHS")
    open_client = _client_factory(args)
    if args.transport == "stdio":
        if not args.user:
            raise ConfigError(f"stdio serves one user: set --user (or ${ENV}USER)")
        asyncio.run(run_stdio(open_client, Caller(args.user, graphs)))
        return
    identify = _identify(args, graphs)
    host, port = _listen(args.listen)
    path = args.path if args.path.startswith("/") else "/" + args.path
    options = HttpOptions(host, path, _listed(args.allowed_host, environ, "ALLOWED_HOSTS"))
    app = http_app(open_client, identify, options)
    try:
        listening = _listening_socket(host, port)
    except OSError as exc:
        raise ConfigError(f"--listen {args.listen}: {exc}") from None
    bound = listening.getsockname()[1]
    # One line on stderr (stdout is left alone), read by scripts that asked for port 0.
    sys.stderr.write(
        f"graphrag-memory-mcp listening on http://{args.listen.rpartition(':')[0]}:{bound}{path}\n"
    )
    sys.stderr.flush()
    config = uvicorn.Config(app, log_level="warning", access_log=False)
    uvicorn.Server(config).run(sockets=[listening])


def main(argv: Sequence[str] | None = None) -> None:
    environ = os.environ
    args = _parser(environ).parse_args(argv)
    try:
        _serve(args, environ)
    except (ConfigError, CallerError) as exc:
        sys.stderr.write(f"graphrag-memory-mcp: configuration error: {exc}\n")
        raise SystemExit(2) from None
    except KeyboardInterrupt:
        pass
