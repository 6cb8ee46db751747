"""Who is calling the MCP server, and so whose memory a tool reads and writes.

The user is never a tool argument. Over stdio the process serves one caller, named in its
configuration (the host that starts it is that user's). Over HTTP each request names its caller
by authentication: a bearer token from a tokens file (each token mapped to a user and the graphs
they may use; the file may hold only tokens' SHA-256 digests), or a header a trusted proxy sets
after its own authentication. A caller may use only their graphs; a tool's optional `graph`
argument picks one of them, the first being the default.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

__all__ = [
    "Caller",
    "CallerError",
    "GraphRefused",
    "HeaderCallers",
    "Identify",
    "TokenCallers",
    "token_digest",
]


class CallerError(ValueError):
    """A configuration of callers the server cannot use (a bad tokens file, an empty graph)."""


class GraphRefused(PermissionError):
    """The caller named a graph they may not use."""


@dataclass(frozen=True, slots=True)
class Caller:
    user: str
    graphs: tuple[str, ...]  # the first is the default

    def __post_init__(self) -> None:
        if not self.user.strip():
            raise CallerError("a caller needs a user")
        if not self.graphs or not all(g.strip() for g in self.graphs):
            raise CallerError(f"caller {self.user!r} needs at least one graph, none empty")

    def graph(self, requested: str | None) -> str:
        """The graph a call uses: `requested` when it is one of the caller's, else refused."""
        if not requested:
            return self.graphs[0]
        if requested not in self.graphs:
            raise GraphRefused(
                f"graph {requested!r} is not one this caller may use "
                f"(allowed: {', '.join(self.graphs)})"
            )
        return requested


class Identify(Protocol):
    """The caller a request's headers name (lower-case names), or None: not authenticated."""

    def __call__(self, headers: Mapping[str, str]) -> Caller | None: ...


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _graphs(raw: Any, where: str) -> tuple[str, ...]:
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list) or not all(isinstance(g, str) for g in raw):
        raise CallerError(f"{where}: graphs must be a list of graph names")
    return tuple(raw)


class TokenCallers:
    """Bearer tokens from a JSON file: `{"callers": [{"token_sha256": "<hex>" | "token":
    "<token>", "user": "alice", "graphs": ["Finance"]}, ...]}`. Tokens are kept as digests and
    compared in constant time; no error names a token."""

    def __init__(self, entries: Sequence[tuple[str, Caller]]) -> None:
        self._by_digest: dict[str, Caller] = {}
        for digest, caller in entries:
            if digest in self._by_digest:
                raise CallerError(
                    f"two entries share one token (users {caller.user!r} and "
                    f"{self._by_digest[digest].user!r})"
                )
            self._by_digest[digest] = caller

    @classmethod
    def from_file(cls, path: Path) -> TokenCallers:
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise CallerError(f"tokens file {path}: {exc}") from None
        entries = document.get("callers") if isinstance(document, dict) else None
        if not isinstance(entries, list) or not entries:
            raise CallerError(f'tokens file {path}: expected {{"callers": [...]}}, not empty')
        out: list[tuple[str, Caller]] = []
        for i, entry in enumerate(entries):
            where = f"tokens file {path}, caller {i}"
            if not isinstance(entry, dict):
                raise CallerError(f"{where}: expected an object")
            plain, digest = entry.get("token"), entry.get("token_sha256")
            if (plain is None) == (digest is None):
                raise CallerError(f"{where}: give exactly one of token and token_sha256")
            if plain is not None and not (isinstance(plain, str) and len(plain) >= 16):
                raise CallerError(f"{where}: a token must be a string of 16 characters or more")
            if digest is not None and not (
                isinstance(digest, str) and len(digest) == 64 and _is_hex(digest)
            ):
                raise CallerError(f"{where}: token_sha256 must be 64 hex digits")
            user = entry.get("user")
            if not isinstance(user, str):
                raise CallerError(f"{where}: user must be a string")
            try:
                caller = Caller(user, _graphs(entry.get("graphs"), where))
            except CallerError as exc:
                raise CallerError(f"{where}: {exc}") from None
            out.append((token_digest(plain) if plain is not None else str(digest).lower(), caller))
        return cls(out)

    def __call__(self, headers: Mapping[str, str]) -> Caller | None:
        scheme, _, token = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        digest = token_digest(token.strip())
        found = None
        for known, caller in self._by_digest.items():  # every entry: no early exit to time
            if hmac.compare_digest(known, digest):
                found = caller
        return found


def _is_hex(text: str) -> bool:
    try:
        int(text, 16)
    except ValueError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class HeaderCallers:
    """The user from a header a trusted proxy sets after authenticating the request (and
    strips from what clients send); the graphs from another header (comma-separated) or, when
    there is none, the configured ones. Only safe where nothing but the proxy reaches the
    server."""

    user_header: str
    graphs_header: str | None
    graphs: tuple[str, ...]

    def __call__(self, headers: Mapping[str, str]) -> Caller | None:
        user = headers.get(self.user_header.lower(), "").strip()
        if not user:
            return None
        graphs = self.graphs
        if self.graphs_header is not None:
            listed = headers.get(self.graphs_header.lower(), "")
            graphs = tuple(g.strip() for g in listed.split(",") if g.strip())
        if not graphs:
            return None
        return Caller(user, graphs)
