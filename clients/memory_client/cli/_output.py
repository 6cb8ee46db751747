"""Everything memoryctl prints goes through `Output`: aligned plain-text tables and key/value
blocks for people, or the response protobuf as JSON for scripts (`--json`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC
from typing import TextIO

from google.protobuf.json_format import MessageToJson
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from memory_client.v1 import memory_pb2 as pb

ELLIPSIS = "…"
_GAP = "  "


@dataclass(frozen=True)
class Column:
    """A table column. Cells longer than `max_width` are cut with an ellipsis, so one long
    message does not push every row off the screen."""

    header: str
    max_width: int = 40
    right: bool = False


def cell(text: str, max_width: int) -> str:
    # Newlines and tabs would break the row; a cell is one line.
    flat = " ".join(text.split())
    if len(flat) <= max_width:
        return flat
    return flat[: max_width - 1] + ELLIPSIS


def timestamp(value: Timestamp) -> str:
    """ISO-8601 UTC to the second; "-" for an unset time (an open interval, say)."""
    if value.seconds == 0 and value.nanos == 0:
        return "-"
    return value.ToDatetime(tzinfo=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def role(value: pb.Role.ValueType) -> str:
    return pb.Role.Name(value).removeprefix("ROLE_").lower()


def feedback(value: pb.Feedback.ValueType) -> str:
    if value == pb.FEEDBACK_NONE:
        return "-"
    return pb.Feedback.Name(value).removeprefix("FEEDBACK_").lower()


def table_lines(columns: Sequence[Column], rows: Sequence[Sequence[str]]) -> list[str]:
    cut = [
        [cell(value, column.max_width) for value, column in zip(row, columns, strict=True)]
        for row in rows
    ]
    widths = [
        max([len(column.header), *(len(row[i]) for row in cut)]) for i, column in enumerate(columns)
    ]
    lines = []
    for row in [[column.header for column in columns], *cut]:
        parts = [
            value.rjust(width) if column.right else value.ljust(width)
            for value, width, column in zip(row, widths, columns, strict=True)
        ]
        lines.append(_GAP.join(parts).rstrip())
    return lines


class Output:
    """stdout for results; `json` says which of the two forms the user asked for."""

    def __init__(self, stream: TextIO, *, json: bool) -> None:
        self._stream = stream
        self.json = json

    def line(self, text: str = "") -> None:
        self._stream.write(text + "\n")

    def block(self, text: str) -> None:
        """Multi-line text as it is (the rendered context), ending with one newline."""
        self._stream.write(text if text.endswith("\n") else text + "\n")

    def message_json(self, message: Message) -> None:
        # Fields at their default (false, 0, "") are printed too, so scripts see a stable shape.
        self.line(
            MessageToJson(
                message,
                preserving_proto_field_name=True,
                always_print_fields_with_no_presence=True,
            )
        )

    def fields(self, pairs: Sequence[tuple[str, str]]) -> None:
        width = max((len(key) for key, _ in pairs), default=0)
        for key, value in pairs:
            self.line(f"{key.ljust(width)}{_GAP}{value}".rstrip())

    def table(
        self, columns: Sequence[Column], rows: Sequence[Sequence[str]], *, empty: str
    ) -> None:
        if not rows:
            self.line(f"({empty})")
            return
        for text in table_lines(columns, rows):
            self.line(text)

    def next_page(self, token: str) -> None:
        if token:
            self.line(f"more: --page-token {token}  (or --all)")
