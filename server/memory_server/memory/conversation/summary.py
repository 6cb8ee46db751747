"""The offline default summarizer: extractive, deterministic, bounded, and stable when rolled.

A summary is plain text, one line per folded message::

    user: I want to plan a hiking trip to Patagonia in March.
    assistant: Torres del Paine is the usual base; book refugios early.
    [… 42 earlier lines condensed …]
    user: Can you compare the W trek with the O circuit?
    assistant: The W takes four to five days; the O adds the back side …

Each line copies the first content-bearing sentence(s) of one message (greetings and thanks are
skipped), cut at a word boundary to a per-line token cap; " …" marks a cut. When the lines no
longer fit the budget, the opening lines (what the user set out to do) and the newest lines are
kept and everything between them is replaced by one marker that counts what it stands for. The
summary is parsed back on the next fold, so markers merge and their counts accumulate instead of
the opening being pushed out. Text in `previous` that is not in this format (e.g. a summary a
language model wrote) is kept, sentence by sentence, as lines without a role.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass

from memory_server.memory.ports import SummaryTurn, TokenCounter

ELLIPSIS = "…"
_MARKER_RE = re.compile(r"^\[… (\d+) earlier lines? condensed …\]$")
_ROLE_LINE_RE = re.compile(r"^[A-Za-z_][\w-]{0,31}: \S")
_SENTENCE_SPLIT_RE = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD_RE = re.compile(r"\w+")
_ROLE_CLEAN_RE = re.compile(r"[^\w-]")
# Inputs longer than this are summarized on a worker thread: the fold of a large import (it
# held the loop for seconds: bench/README.md, "Figures behind the code") must not stall the
# event loop every scope shares.
_INLINE_CHARS = 8192

# A sentence made only of these words carries no content ("Thanks!", "ok", "You're welcome.").
_FILLER_WORDS = frozenset(
    """
    hi hello hey hiya howdy yo morning good afternoon evening there
    thanks thank thx ty cheers appreciate appreciated it you so much very a lot
    ok okay k kk sure great cool nice awesome perfect excellent wonderful fine alright
    got sounds makes sense gotcha understood noted right
    please bye goodbye later see soon np problem worries
    welcome glad happy to help re s ll d m that this is lol haha wow oh ah hmm
    """.split()  # noqa: SIM905
)
_FILLER_PHRASES = frozenset({"no problem", "no worries", "no thanks", "no thank you"})


def marker_text(count: int) -> str:
    """The line that stands for `count` condensed lines."""
    noun = "line" if count == 1 else "lines"
    return f"[… {count} earlier {noun} condensed …]"


@dataclass(frozen=True, slots=True)
class _Line:
    text: str
    tokens: int


@dataclass(frozen=True, slots=True)
class _Gap:
    count: int


_Entry = _Line | _Gap


class ExtractiveSummarizer:
    """Summarizer that needs no model: it copies, trims and condenses lines (see module doc)."""

    def __init__(self, counter: TokenCounter) -> None:
        self._counter = counter

    @property
    def name(self) -> str:
        return "extractive-v1"

    async def summarize(self, previous: str, turns: Sequence[SummaryTurn], max_tokens: int) -> str:
        if len(previous) + sum(len(t.content) for t in turns) <= _INLINE_CHARS:
            return self.summarize_sync(previous, turns, max_tokens)
        return await asyncio.to_thread(self.summarize_sync, previous, list(turns), max_tokens)

    def summarize_sync(self, previous: str, turns: Sequence[SummaryTurn], max_tokens: int) -> str:
        """The same as `summarize`, without the coroutine (it does no I/O)."""
        if max_tokens <= 0:
            return ""
        cap = _line_cap(max_tokens)
        entries = self._parse(previous, cap)
        for turn in turns:
            line = self._turn_line(turn, cap)
            if line is not None:
                entries.append(line)
        return self._fit(_merge_gaps(entries), max_tokens)

    # -- lines -----------------------------------------------------------------------------

    def _line(self, text: str) -> _Line:
        return _Line(text, self._counter.count(text))

    def _parse(self, previous: str, cap: int) -> list[_Entry]:
        entries: list[_Entry] = []
        for raw in previous.splitlines():
            text = " ".join(raw.split())
            if not text:
                continue
            marker = _MARKER_RE.match(text)
            if marker is not None:
                entries.append(_Gap(int(marker.group(1))))
            elif _ROLE_LINE_RE.match(text):
                entries.append(self._line(self._cut(text, cap)))
            else:  # foreign text (e.g. a model's summary): keep it, one sentence per line
                entries.extend(self._line(self._cut(s, cap)) for s in _sentences(text))
        return entries

    def _turn_line(self, turn: SummaryTurn, cap: int) -> _Line | None:
        content = [s for s in _sentences(turn.content) if not _is_filler(s)]
        if not content:
            return None
        role = _ROLE_CLEAN_RE.sub("", turn.role.strip().lower())[:32] or "message"
        if not (role[0].isalpha() or role[0] == "_"):
            role = "message"
        return self._line(self._cut(f"{role}: {' '.join(content)}", cap))

    def _cut(self, text: str, max_tokens: int) -> str:
        """`text` if it fits, else its longest whole-word prefix that fits with " …" appended."""
        if self._counter.count(text) <= max_tokens:
            return text
        words = text.split(" ")
        lo, hi = 0, len(words) - 1  # invariant: words[:lo] + " …" fits
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._counter.count(" ".join(words[:mid]) + " " + ELLIPSIS) <= max_tokens:
                lo = mid
            else:
                hi = mid - 1
        if lo > 0:
            return " ".join(words[:lo]) + " " + ELLIPSIS
        # The first word alone is too long (a URL, a hash): keep a prefix of it.
        cut = self._counter.truncate(text, max_tokens - 1).rstrip()
        if cut and self._counter.count(cut + ELLIPSIS) <= max_tokens:
            return cut + ELLIPSIS
        return self._counter.truncate(text, max_tokens)

    # -- fitting ---------------------------------------------------------------------------

    def _fit(self, entries: list[_Entry], max_tokens: int) -> str:
        rendered = _render(entries)
        if self._counter.count(rendered) <= max_tokens:
            return rendered
        lines = [e for e in entries if isinstance(e, _Line)]
        if not lines:  # only markers: there is nothing to keep but the count
            return self._cut(rendered, max_tokens)

        # Keep the opening up to a third of the budget, stopping at the first gap.
        head_budget = max_tokens // 3
        head = 0
        used = 0
        while head < len(entries):
            entry = entries[head]
            if not isinstance(entry, _Line) or used + entry.tokens + 1 > head_budget:
                break
            used += entry.tokens + 1
            head += 1
        # Keep the newest lines with the rest, less room for the marker.
        marker_cost = self._counter.count(marker_text(10**6)) + 1
        tail_budget = max_tokens - used - marker_cost
        tail = len(entries)
        used = 0
        while tail > head:
            entry = entries[tail - 1]
            if not isinstance(entry, _Line) or used + entry.tokens + 1 > tail_budget:
                break
            used += entry.tokens + 1
            tail -= 1

        # Token counts are not quite additive; give up lines until the exact count fits.
        while True:
            middle = entries[head:tail]
            condensed = sum(e.count if isinstance(e, _Gap) else 1 for e in middle)
            kept = entries[:head] + ([_Gap(condensed)] if condensed else []) + entries[tail:]
            if not any(isinstance(e, _Line) for e in kept):
                break  # a marker alone says nothing; fall through to the opening
            result = _render(kept)
            if self._counter.count(result) <= max_tokens:
                return result
            if tail < len(entries):
                tail += 1
            elif head > 0:
                head -= 1
            else:
                break
        # A tiny budget: keep as much of the opening line as fits.
        return self._cut(lines[0].text, max_tokens)


def _line_cap(max_tokens: int) -> int:
    """Tokens one line may take: an eighth of the budget, at least 8 and at most 48."""
    return max(8, min(48, max_tokens // 8))


def _sentences(text: str) -> list[str]:
    out: list[str] = []
    for part in _SENTENCE_SPLIT_RE.split(text):
        sentence = " ".join(part.split())
        if sentence:
            out.append(sentence)
    return out


def _is_filler(sentence: str) -> bool:
    words = _WORD_RE.findall(sentence.lower())
    return " ".join(words) in _FILLER_PHRASES or all(word in _FILLER_WORDS for word in words)


def _merge_gaps(entries: list[_Entry]) -> list[_Entry]:
    merged: list[_Entry] = []
    for entry in entries:
        last = merged[-1] if merged else None
        if isinstance(entry, _Gap) and isinstance(last, _Gap):
            merged[-1] = _Gap(last.count + entry.count)
        else:
            merged.append(entry)
    return merged


def _render(entries: Sequence[_Entry]) -> str:
    return "\n".join(e.text if isinstance(e, _Line) else marker_text(e.count) for e in entries)
