"""Where a secret starts and ends in a message, and the message without the sentences that
hold one (DetectSecretsFilter's text surgery)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from re import Match
from typing import Final

# A sentence ends at . ! or ? (maybe closed by a quote or bracket) followed by blanks. Chat text
# is often all lower case, so the next sentence may start with anything; splitting "e.g. this"
# too finely is harmless, because secrets are single tokens or phrases without such stops.
_SENTENCE_BREAK: Final = re.compile(r"(?<=[.!?])[\"')\]]*[ \t]+(?=\S)")
# What a secret token is made of: stop at blanks, quotes, brackets and list separators.
_TOKEN_STOP: Final = frozenset(" \t\r\n\"'`<>(){}[],;|")
# A long line is scanned in pieces of about WINDOW_CHARS, each reaching WINDOW_REACH further.
# The longest phrase a detector matches ("my password for the staging VPN is ...", a bearer
# header, a quoted assignment) is well under WINDOW_REACH, so each lies whole in one piece.
WINDOW_CHARS: Final = 2048
WINDOW_REACH: Final = 512
_BLANK: Final = re.compile(r"[ \t\r\n]")


def secret_span(found: Match[str]) -> tuple[int, int]:
    """Where a detector's match puts the secret."""
    # Regexes with groups mark the secret with the last group that matched (the whole match
    # can include the variable name); the rest mark it with the whole match.
    for index in range(found.re.groups, 0, -1):
        if found.group(index):
            return found.span(index)
    return found.span()


def token_around(line: str, start: int, end: int) -> tuple[int, int]:
    """The whole token of `line` around `start:end`."""
    # Detectors sometimes report only part of a secret (`ghp`, a JWT without its signature) or
    # include the blank before it; the whole token around the report is what must go.
    while start < end and line[start] in _TOKEN_STOP:
        start += 1
    while end > start and line[end - 1] in _TOKEN_STOP:
        end -= 1
    while start > 0 and line[start - 1] not in _TOKEN_STOP:
        start -= 1
    while end < len(line) and line[end] not in _TOKEN_STOP:
        end += 1
    return start, end


def windows(line: str) -> Iterator[tuple[int, int]]:
    """`start, end` of the pieces a line is scanned in: a line of any length costs the scan
    bounded steps (each regular expression holds the GIL for one piece, not for a 60 KiB line,
    so the event loop waits microseconds for it), and a piece without a credential word skips
    most detectors. Pieces are cut at blanks, so no token is ever split; piece k+1 starts where
    piece k's own part ends, and piece k reaches WINDOW_REACH further (to the next blank), so
    any match of up to WINDOW_REACH characters lies whole in one piece. A run with no blank is
    never cut."""
    length = len(line)
    start = 0
    while length - start > WINDOW_CHARS + WINDOW_REACH:
        cut = _blank_from(line, start + WINDOW_CHARS)
        reach = _blank_from(line, cut + WINDOW_REACH) if cut < length else length
        yield start, reach
        if reach == length:
            return
        start = cut
    yield start, length


def _blank_from(line: str, position: int) -> int:
    found = _BLANK.search(line, position)
    return found.start() if found else len(line)


def merge(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping (start, end) spans as one: several detectors often report the same secret
    (a JWT is also high-entropy and follows "Bearer")."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def drop_segments(text: str, spans: Sequence[tuple[int, int]]) -> tuple[str, int]:
    """The text without the sentences (split within lines) that overlap a span, and how many
    sentences went. Untouched lines keep their exact bytes; a line whose sentences all went
    disappears with its line break, and no doubled blank line is left behind."""
    out: list[str] = []
    dropped = 0
    after_removed_line = False
    offset = 0
    for line in text.split("\n"):
        line_start = offset
        offset += len(line) + 1
        pieces = _sentences(line)
        kept: list[str] = []
        for start, end in pieces:
            if _overlaps(spans, line_start + start, line_start + end):
                dropped += 1
            else:
                kept.append(line[start:end])
        if len(kept) == len(pieces):
            if after_removed_line and not line.strip() and (not out or not out[-1].strip()):
                continue  # a blank line that would double the one before the removed line
            out.append(line)
            after_removed_line = False
        elif kept:
            indent = line[: len(line) - len(line.lstrip())]
            eol = "\r" if line.endswith("\r") else ""  # keep CRLF text consistent
            rebuilt = "".join(kept).rstrip()
            if not rebuilt.startswith(indent):
                rebuilt = indent + rebuilt.lstrip()
            out.append(rebuilt + eol)
            after_removed_line = False
        else:
            after_removed_line = True
    if after_removed_line:
        while out and not out[-1].strip():
            out.pop()
    result = "\n".join(out)
    return (result if result.strip() else ""), dropped


def _sentences(line: str) -> list[tuple[int, int]]:
    if not line.strip():
        return [(0, len(line))]
    pieces: list[tuple[int, int]] = []
    start = 0
    for found in _SENTENCE_BREAK.finditer(line):
        pieces.append((start, found.end()))
        start = found.end()
    pieces.append((start, len(line)))
    return pieces


def _overlaps(spans: Sequence[tuple[int, int]], start: int, end: int) -> bool:
    return any(span_start < end and start < span_end for span_start, span_end in spans)
