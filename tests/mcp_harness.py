"""The MCP server as hosts run it, for tests: `python -m memory_client.mcp_server` over stdio
(started by the SDK's own stdio client) or over streamable HTTP (a process on a free port, the
SDK's streamable HTTP client with the caller's headers), against a real memory server."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent

MODULE = ("-m", "memory_client.mcp_server")


@asynccontextmanager
async def stdio_session(
    target: str, user: str, graphs: Sequence[str], *args: str, errlog: Path | None = None
) -> AsyncIterator[ClientSession]:
    command = [*MODULE, "--target", target, "--user", user]
    command += [a for g in graphs for a in ("--graph", g)]
    params = StdioServerParameters(command=sys.executable, args=[*command, *args])
    with open(errlog or "/dev/null", "w") as log:
        async with (
            stdio_client(params, errlog=log) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


class HttpMcp:
    """A `--transport http` process; `url` is its MCP endpoint, `log` its stderr lines."""

    def __init__(self, *args: str) -> None:
        command = [sys.executable, *MODULE, "--transport", "http", "--listen", "127.0.0.1:0"]
        self.process = subprocess.Popen(
            [*command, *args], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
        )
        self.log: list[str] = []
        self.url = ""
        assert self.process.stderr is not None
        deadline = time.monotonic() + 60
        for line in self.process.stderr:
            self.log.append(line)
            if "listening on " in line:
                self.url = line.split("listening on ", 1)[1].strip()
                break
            if time.monotonic() > deadline:
                break
        if not self.url:
            self.process.kill()
            raise AssertionError("MCP server did not start:\n" + "".join(self.log))
        self._drain = threading.Thread(target=self._read_rest, daemon=True)
        self._drain.start()

    def _read_rest(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.log.append(line)

    @property
    def base(self) -> str:
        return self.url.rsplit("/", 1)[0]

    def stop(self) -> int:
        self.process.terminate()
        try:
            code = self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait(10)
        self._drain.join(5)
        assert self.process.stderr is not None
        self.process.stderr.close()
        return code


@contextmanager
def http_mcp(*args: str) -> Iterator[HttpMcp]:
    server = HttpMcp(*args)
    try:
        yield server
    finally:
        server.stop()


@asynccontextmanager
async def http_session(url: str, headers: dict[str, str]) -> AsyncIterator[ClientSession]:
    async with (
        httpx.AsyncClient(headers=headers, timeout=60) as http,
        streamable_http_client(url, http_client=http) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def tokens_file(path: Path, callers: dict[str, tuple[str, list[str]]]) -> Path:
    """`callers`: token -> (user, graphs); written with every token as its SHA-256 but the first
    (both forms the file takes)."""
    import hashlib

    entries: list[dict[str, Any]] = []
    for i, (token, (user, graphs)) in enumerate(callers.items()):
        key = (
            {"token": token}
            if i == 0
            else {"token_sha256": hashlib.sha256(token.encode()).hexdigest()}
        )
        entries.append({**key, "user": user, "graphs": graphs})
    path.write_text(json.dumps({"callers": entries}))
    return path


async def call(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    """The tool's structured answer; AssertionError with its text when it is a tool error."""
    result = await session.call_tool(tool, arguments)
    assert not result.isError, f"{tool}: {text_of(result)}"
    assert result.structuredContent is not None, tool
    return result.structuredContent


async def refused(session: ClientSession, tool: str, **arguments: Any) -> str:
    """The text of a tool error, after the SDK's prefix (AssertionError when the call
    succeeded)."""
    result = await session.call_tool(tool, arguments)
    assert result.isError, f"{tool} succeeded: {result.structuredContent}"
    text = text_of(result)
    # The SDK (1.x) says which tool failed before the tool's own words.
    return text.removeprefix(f"Error executing tool {tool}: ")


def text_of(result: CallToolResult) -> str:
    return " ".join(c.text for c in result.content if isinstance(c, TextContent))
