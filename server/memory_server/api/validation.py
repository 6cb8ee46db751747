"""Request validation at the edge: every problem names its field."""

from __future__ import annotations

import unicodedata
from datetime import UTC, datetime, timedelta

from memory_server.memory.errors import InvalidArgument
from memory_server.memory.identity import Scope

MAX_ID_CHARS = 256
MAX_NAME_CHARS = 512
MAX_COMMENT_BYTES = 16384

# google.protobuf.Timestamp's range: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999999Z.
_MIN_TIMESTAMP_SECONDS = -62_135_596_800
_MAX_TIMESTAMP_SECONDS = 253_402_300_799
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _has_control(text: str) -> bool:
    # Cc covers NUL and the other C0/C1 controls; Cs catches lone surrogates.
    return any(unicodedata.category(ch) in ("Cc", "Cs") for ch in text)


def identifier(field: str, value: str, *, required: bool = True) -> str:
    """Ids and scope names: non-empty, bounded, no control characters, no edge whitespace.

    mem0 strips whitespace from user ids and joins graphname and username with NUL, so either
    would merge two scopes if allowed through."""
    if not value:
        if required:
            raise InvalidArgument(field, "is required")
        return value
    if len(value) > MAX_ID_CHARS:
        raise InvalidArgument(field, f"longer than {MAX_ID_CHARS} characters")
    if _has_control(value):
        raise InvalidArgument(field, "must not contain control characters (NUL, newline, …)")
    if value != value.strip():
        raise InvalidArgument(field, "must not start or end with whitespace")
    return value


def scope(username: str, graphname: str) -> Scope:
    return Scope(identifier("username", username), identifier("graphname", graphname))


def items(field: str, count: int, limit: int, noun: str) -> None:
    """A repeated field of one call: at least one item and at most `limit`."""
    if not count:
        raise InvalidArgument(field, "must not be empty")
    if count > limit:
        raise InvalidArgument(field, f"{count} {noun}; the limit is {limit} per call")


def content(field: str, value: str, max_bytes: int, *, required: bool = True) -> str:
    if required and not value.strip():
        raise InvalidArgument(field, "must not be empty")
    size = len(value.encode("utf-8", errors="surrogatepass"))
    if size > max_bytes:
        raise InvalidArgument(field, f"is {size} bytes; the limit is {max_bytes}")
    if "\x00" in value:
        raise InvalidArgument(field, "must not contain NUL characters")
    try:
        value.encode("utf-8")  # strict: fails exactly on a surrogate (category Cs)
    except UnicodeEncodeError:
        raise InvalidArgument(field, "must be valid UTF-8 text") from None
    return value


def short_text(field: str, value: str, max_chars: int) -> str:
    if len(value) > max_chars:
        raise InvalidArgument(field, f"longer than {max_chars} characters")
    if "\x00" in value:
        raise InvalidArgument(field, "must not contain NUL characters")
    return value


def page_size(field: str, value: int, default: int, maximum: int) -> int:
    if value < 0:
        raise InvalidArgument(field, "must not be negative")
    if value == 0:
        return default
    return min(value, maximum)


def duration_seconds(field: str, value: float) -> float:
    if not 0 <= value < 86400 * 365 or value != value:
        raise InvalidArgument(field, "must be a non-negative number of seconds")
    return value


def timestamp(field: str, seconds: int, nanos: int) -> datetime:
    """A google.protobuf.Timestamp as an aware UTC datetime (to the microsecond, like
    PostgreSQL's timestamptz)."""
    if not 0 <= nanos <= 999_999_999:
        raise InvalidArgument(field, f"nanos is {nanos}; it must be between 0 and 999999999")
    if not _MIN_TIMESTAMP_SECONDS <= seconds <= _MAX_TIMESTAMP_SECONDS:
        raise InvalidArgument(
            field,
            f"seconds is {seconds}; a Timestamp is between 0001-01-01T00:00:00Z "
            f"({_MIN_TIMESTAMP_SECONDS}) and 9999-12-31T23:59:59Z ({_MAX_TIMESTAMP_SECONDS})",
        )
    return _EPOCH + timedelta(seconds=seconds, microseconds=nanos // 1000)
