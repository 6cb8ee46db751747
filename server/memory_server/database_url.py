"""`database_url` as operators write it: libpq's `postgresql://` and `postgres://`, and the
SQLAlchemy forms GraphRAG's own configuration uses (`postgresql+psycopg://`, `+psycopg2`,
`+psycopg2cffi`, `+asyncpg`, `+pg8000`). The driver named after the `+` is SQLAlchemy's choice
for GraphRAG's process; this server always connects with asyncpg, so the URL is read for what
it says about the database (user, password, hosts, database, TLS, which host of several) and
the driver is dropped.

Query parameters asyncpg honours are kept (`sslmode`, `target_session_attrs`, a socket `host`,
...); `connect_timeout` becomes asyncpg's connect timeout; anything else is refused by name,
since asyncpg would pass an unknown key to the server as a run-time setting and the server
would refuse the connection with a message far from its cause.

The password is never part of a message: `shown` is the URL with it (and `sslpassword`) masked,
and every error is written from that.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

__all__ = ["DRIVERS", "DatabaseUrl", "DatabaseUrlError", "parse_database_url"]

# SQLAlchemy's PostgreSQL dialects: any of them names a database this server can reach.
DRIVERS = frozenset({"psycopg", "psycopg2", "psycopg2cffi", "asyncpg", "pg8000"})
_MASK = "***"
# What asyncpg reads from a URL's query (asyncpg.connect_utils, 0.30–0.32), with the values
# it accepts where it checks them.
_SSLMODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")
_SESSION_ATTRS = ("any", "primary", "standby", "read-write", "read-only", "prefer-standby")
_KEPT = frozenset(
    {
        "host",
        "port",
        "dbname",
        "database",
        "user",
        "password",
        "passfile",
        "service",
        "sslmode",
        "sslcert",
        "sslkey",
        "sslrootcert",
        "sslcrl",
        "sslpassword",
        "sslnegotiation",
        "ssl_min_protocol_version",
        "ssl_max_protocol_version",
        "target_session_attrs",
        "krbsrvname",
        "gsslib",
        # A run-time setting the server takes at connection start (asyncpg sends the keys it
        # does not read itself as such): how this server shows in pg_stat_activity.
        "application_name",
    }
)
_SECRET_KEYS = frozenset({"password", "sslpassword"})
_SCHEME = re.compile(r"^(postgres|postgresql)(?:\+([A-Za-z0-9_]+))?$")


class DatabaseUrlError(ValueError):
    """A URL this server cannot honour; the message names the part and holds no password."""


@dataclass(frozen=True, slots=True)
class DatabaseUrl:
    dsn: str  # what asyncpg connects with: postgresql://, the driver dropped
    shown: str  # the URL with its passwords masked, for logs and errors
    connect_timeout_s: float | None  # the URL's connect_timeout, if it gives one
    secrets: tuple[str, ...] = ()  # its passwords, as written and decoded

    def scrub(self, text: str) -> str:
        """`text` (a driver's or the server's message) with the URL's passwords masked."""
        for secret in sorted(self.secrets, key=len, reverse=True):
            text = text.replace(secret, _MASK)
        return text


def _masked_netloc(netloc: str) -> str:
    auth, at, hosts = netloc.rpartition("@")
    if not at:
        return netloc
    user, colon, _ = auth.partition(":")
    return f"{user}:{_MASK}@{hosts}" if colon else netloc


def _url(scheme: str, netloc: str, path: str, query: list[tuple[str, str]]) -> str:
    # Not urlunsplit: it writes `postgresql:/db` for `postgresql:///db` (a socket in `host`).
    encoded = urlencode(query, safe="/,:*")
    return f"{scheme}://{netloc}{path}{'?' if encoded else ''}{encoded}"


def _shown(scheme: str, netloc: str, path: str, query: list[tuple[str, str]]) -> str:
    masked = [(k, _MASK if k in _SECRET_KEYS else v) for k, v in query]
    return _url(scheme, _masked_netloc(netloc), path, masked)


def _check_port(port: str, shown: str) -> None:
    if port and not (port.isdigit() and 0 < int(port) < 65536):
        raise DatabaseUrlError(f"port {port!r} is not a port (in {shown})")


def _check_hosts(hostspec: str, shown: str) -> None:
    """Each `host[:port]` of a comma-separated list (asyncpg tries them in order)."""
    for part in hostspec.split(","):
        if part.startswith("["):  # [IPv6]:port
            _, bracket, rest = part.partition("]")
            _check_port(rest[1:] if bracket and rest.startswith(":") else "", shown)
        else:
            _check_port(part.partition(":")[2], shown)


def _connect_timeout(raw: str, shown: str) -> float:
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise DatabaseUrlError(
            f"connect_timeout {raw!r} is not a positive number of seconds (in {shown})"
        )
    return seconds


def parse_database_url(url: str) -> DatabaseUrl:
    """The URL read for asyncpg, or DatabaseUrlError naming the part it cannot honour."""
    scheme_text, sep, _ = url.partition("://")
    found = _SCHEME.match(scheme_text) if sep else None
    if found is None:
        raise DatabaseUrlError(
            "expected postgresql://, postgres:// or postgresql+<driver>:// "
            f"(driver one of {', '.join(sorted(DRIVERS))})"
        )
    split = urlsplit(url)
    if split.netloc.count("@") > 1:
        raise DatabaseUrlError("the user or password holds '@'; percent-encode it as %40")
    try:
        query = parse_qsl(split.query, keep_blank_values=True, strict_parsing=bool(split.query))
    except ValueError:
        query = None
    if query is None:
        raise DatabaseUrlError("its query (after '?') is not key=value pairs")
    shown = _shown(scheme_text, split.netloc, split.path, query)
    if found[2] and found[1] == "postgres":
        raise DatabaseUrlError(
            f"SQLAlchemy names the dialect postgresql+{found[2]}, not "
            f"postgres+{found[2]} (in {shown})"
        )
    if found[2] and found[2].lower() not in DRIVERS:
        raise DatabaseUrlError(
            f"driver {found[2]!r} is not a PostgreSQL driver SQLAlchemy names "
            f"(one of {', '.join(sorted(DRIVERS))}; in {shown})"
        )
    if split.fragment:
        raise DatabaseUrlError(f"a URL with a '#' fragment (in {shown})")
    _check_hosts(split.netloc.rpartition("@")[2], shown)
    kept: list[tuple[str, str]] = []
    timeout: float | None = None
    for key, value in query:
        if key == "connect_timeout":
            timeout = _connect_timeout(value, shown)
        elif key not in _KEPT:
            raise DatabaseUrlError(
                f"query parameter {key!r} cannot be honoured (this server "
                f"connects with asyncpg, which reads {', '.join(sorted(_KEPT))} and "
                f"connect_timeout; in {shown})"
            )
        elif key == "sslmode" and value not in _SSLMODES:
            raise DatabaseUrlError(f"sslmode {value!r} is not one of {', '.join(_SSLMODES)}")
        elif key == "target_session_attrs" and value not in _SESSION_ATTRS:
            raise DatabaseUrlError(
                f"target_session_attrs {value!r} is not one of {', '.join(_SESSION_ATTRS)}"
            )
        else:
            if key == "port":  # one per host, as in the host list
                for port in value.split(","):
                    _check_port(port, shown)
            kept.append((key, value))
    dsn = _url("postgresql", split.netloc, split.path, kept)
    auth, at, _ = split.netloc.rpartition("@")
    written = [auth.partition(":")[2]] if at else []
    written += [v for k, v in query if k in _SECRET_KEYS]
    secrets = {s for w in written for s in (w, unquote(w)) if s}
    return DatabaseUrl(dsn=dsn, shown=shown, connect_timeout_s=timeout, secrets=tuple(secrets))
