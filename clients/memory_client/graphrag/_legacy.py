"""chat-history's SQLite database, read-only: GORM's `conversations` and `messages` rows as typed
records, and the timestamps go-sqlite3 writes. Nothing here talks to the memory service."""

from __future__ import annotations

import math
import re
import sqlite3
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from urllib.parse import quote

__all__ = [
    "LegacyConversation",
    "LegacyDataError",
    "LegacyMessage",
    "open_legacy",
    "parse_timestamp",
    "read_conversations",
    "read_messages",
]


class LegacyDataError(Exception):
    """The file cannot be read as chat-history's database: missing, not SQLite, or without a
    table or column the import needs."""


@dataclass(frozen=True)
class LegacyConversation:
    row_id: int
    user_id: str
    conversation_id: str
    name: str
    deleted: bool


@dataclass(frozen=True)
class LegacyMessage:
    row_id: int
    conversation_id: str
    message_id: str  # "" when chat-history stored none (or the nil UUID)
    parent_id: str
    model: str
    content: str
    role: str
    response_time_seconds: float
    feedback: int
    comment: str
    created_at: datetime | None  # None only when `problems` says why
    deleted: bool
    # Values that could not be read faithfully; the planner fails the conversation for them
    # rather than guess (an unreadable time must not become "now").
    problems: tuple[str, ...] = ()


# go-sqlite3 writes "2006-01-02 15:04:05.999999999-07:00"; it also reads (so a database may hold)
# a "T" separator, "Z", no offset (UTC), no seconds, or a date alone.
_TIME = re.compile(
    r"(?P<y>\d{4})-(?P<mo>\d{2})-(?P<d>\d{2})"
    r"(?:[T ](?P<h>\d{2}):(?P<mi>\d{2})(?::(?P<s>\d{2})(?:[.,](?P<frac>\d+))?)?)?"
    r"\s*(?:(?P<z>Z)|(?P<sign>[+-])(?P<oh>\d{2})(?::?(?P<om>\d{2}))?)?",
    re.IGNORECASE,
)
_NUMBER = re.compile(r"[+-]?\d+(?:\.\d+)?")
_NIL_UUID = str(uuid.UUID(int=0))
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def parse_timestamp(value: object) -> datetime:
    """A chat-history time as an aware UTC datetime, exact to the microsecond (a nanosecond
    fraction is truncated). Integers and numeric text are epoch seconds. Raises ValueError."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    if isinstance(value, int | float) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} is not a time")
        try:
            return datetime.fromtimestamp(value, UTC)
        except (OverflowError, OSError, ValueError) as exc:
            raise ValueError(f"{value!r} is out of range as epoch seconds") from exc
    if not isinstance(value, str):
        raise ValueError("no time" if value is None else f"{value!r} is not a time")
    text = value.strip()
    if _NUMBER.fullmatch(text):
        return parse_timestamp(float(text) if "." in text else int(text))
    match = _TIME.fullmatch(text)
    if match is None:
        raise ValueError(f"{value!r} is not a time chat-history writes")
    g = match.groupdict()
    tz = UTC
    if g["sign"]:
        offset = timedelta(hours=int(g["oh"]), minutes=int(g["om"] or 0))
        tz = timezone(-offset if g["sign"] == "-" else offset)
    micros = int((g["frac"] or "")[:6].ljust(6, "0"))
    try:
        parsed = datetime(
            int(g["y"]),
            int(g["mo"]),
            int(g["d"]),
            int(g["h"] or 0),
            int(g["mi"] or 0),
            int(g["s"] or 0),
            micros,
            tzinfo=tz,
        )
        return parsed.astimezone(UTC)
    except (ValueError, OverflowError) as exc:
        raise ValueError(f"{value!r} is not a valid time: {exc}") from exc


def _time_us(value: object) -> int | None:
    try:
        return (parse_timestamp(value) - _EPOCH) // timedelta(microseconds=1)
    except ValueError:
        return None  # sorts first; the planner reports the time as a problem


def open_legacy(path: str | Path) -> sqlite3.Connection:
    """Opens the database read-only (SQLite refuses every write on it). The connection may be
    used from another thread, one call at a time, so the async importer can read off its loop."""
    file = Path(path)
    if not file.is_file():
        raise LegacyDataError(f"{file}: no such file")
    try:
        conn = sqlite3.connect(
            f"file:{quote(str(file.resolve()))}?mode=ro", uri=True, check_same_thread=False
        )
    except sqlite3.Error as exc:
        raise LegacyDataError(f"{file}: cannot open it: {exc}") from exc
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        # Stored times come in several formats, so SQLite cannot compare them as they are.
        conn.create_function("legacy_time_us", 1, _time_us, deterministic=True)
        for table in ("conversations", "messages"):
            _columns(conn, table)  # before anything is sent
    except sqlite3.Error as exc:
        conn.close()
        raise LegacyDataError(f"{file}: cannot read it as SQLite: {exc}") from exc
    except LegacyDataError as exc:
        conn.close()
        raise LegacyDataError(f"{file}: {exc}") from None
    return conn


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    try:
        rows = conn.execute(f"PRAGMA table_info({table})").fetchall()
    except sqlite3.Error as exc:
        raise LegacyDataError(f"cannot read table {table!r}: {exc}") from exc
    if not rows:
        raise LegacyDataError(f"no table {table!r}: is this chat-history's database?")
    return {str(row[1]).lower() for row in rows}


def _select(
    conn: sqlite3.Connection, table: str, wanted: dict[str, tuple[str, ...]], required: set[str]
) -> str:
    """SELECT with one column per key of `wanted` (the first candidate the table has, else
    NULL), so older versions of the schema read like the newest."""
    available = _columns(conn, table)
    parts = []
    for alias, candidates in wanted.items():
        found = next((c for c in candidates if c in available), None)
        if found is None and alias in required:
            raise LegacyDataError(f"table {table!r} has no column {candidates[0]!r}")
        parts.append(f'"{found}" AS {alias}' if found else f"NULL AS {alias}")
    return f"SELECT {', '.join(parts)} FROM {table}"


def _text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bytes):
        # A UUID stored as its 16 raw bytes rather than its text.
        return str(uuid.UUID(bytes=value)) if len(value) == 16 else value.decode("utf-8", "replace")
    return str(value)


def _uuid_text(value: object) -> str:
    text = _text(value).strip()
    return "" if text == _NIL_UUID else text


def read_conversations(conn: sqlite3.Connection) -> list[LegacyConversation]:
    """Every conversation row, soft-deleted ones included (marked)."""
    sql = _select(
        conn,
        "conversations",
        {
            "id": ("id",),
            "user_id": ("user_id",),
            "conversation_id": ("conversation_id",),
            "name": ("name",),
            "deleted_at": ("deleted_at",),
        },
        {"id", "user_id", "conversation_id"},
    )
    try:
        rows = conn.execute(f"{sql} ORDER BY id").fetchall()
    except sqlite3.Error as exc:
        raise LegacyDataError(f"cannot read conversations: {exc}") from exc
    return [
        LegacyConversation(
            row_id=int(row_id),
            user_id=_text(user_id),
            conversation_id=_uuid_text(conversation_id),
            name=_text(name),
            deleted=deleted_at is not None,
        )
        for row_id, user_id, conversation_id, name, deleted_at in rows
    ]


def read_messages(conn: sqlite3.Connection) -> Iterator[LegacyMessage]:
    """Every message row, soft-deleted ones included (marked), grouped by conversation_id and
    in row order within each group; the groups by their newest created_at, oldest first.
    Streams: one row in memory at a time."""
    sql = _select(
        conn,
        "messages",
        {
            "id": ("id",),
            "conversation_id": ("conversation_id",),
            "message_id": ("message_id",),
            "parent_id": ("parent_id",),
            "model": ("model_name", "model"),
            "content": ("content",),
            "role": ("role",),
            "response_time": ("response_time",),
            "feedback": ("feedback",),
            "comment": ("comment",),
            "created_at": ("created_at",),
            "deleted_at": ("deleted_at",),
        },
        {"id", "conversation_id", "message_id", "content", "role"},
    )
    try:
        # The server stamps a conversation's updated_at when it is imported, and lists the most
        # recently updated first: importing the most recently active last keeps the UI's order.
        order = "max(legacy_time_us(created_at)) OVER (PARTITION BY conversation_id)"
        order += ", conversation_id, id"
        for row in conn.execute(f"{sql} ORDER BY {order}"):
            yield _message(row)
    except sqlite3.Error as exc:
        raise LegacyDataError(f"cannot read messages: {exc}") from exc


def _message(row: Sequence[Any]) -> LegacyMessage:
    (row_id, conversation_id, message_id, parent_id, model, content, role) = row[:7]
    response_time, feedback, comment, created_at, deleted_at = row[7:]
    problems: list[str] = []
    when: datetime | None = None
    try:
        when = parse_timestamp(created_at)
    except ValueError as exc:
        problems.append(f"created_at: {exc}")
    seconds = 0.0
    if response_time is not None:
        try:
            seconds = float(response_time)
        except (TypeError, ValueError):
            seconds = math.nan
        if not (math.isfinite(seconds) and seconds >= 0):
            problems.append(f"response_time: {response_time!r} is not a number of seconds")
            seconds = 0.0
    if feedback is None:
        feedback = 0
    if feedback not in (0, 1, 2):
        problems.append(f"feedback: {feedback!r} is not 0, 1 or 2")
        feedback = 0
    return LegacyMessage(
        row_id=int(row_id),
        conversation_id=_uuid_text(conversation_id),
        message_id=_uuid_text(message_id),
        parent_id=_uuid_text(parent_id),
        model=_text(model),
        content=_text(content),
        role=_text(role),
        response_time_seconds=seconds,
        feedback=int(feedback),
        comment=_text(comment),
        created_at=when,
        deleted=deleted_at is not None,
        problems=tuple(problems),
    )
