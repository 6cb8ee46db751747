"""The values a fact's text names, and the frame around them: what tells "Will use Postgres 14
for the pilot" from "Will use Postgres 16 for the pilot" when similarity cannot (MiniLM scores
such pairs 0.92-0.97, at or above the reconciler's near-duplicate cut-off).

A value is a token the embedding barely sees but the fact is about:

* figures: numbers (decimals, versions such as 3.11, ordinals such as 3rd; "two" = 2, "third"
  = 3rd), codes of letters and digits (JIRA-4411, P5R0N1, AZ611, E10293) and dates (2024-05-01,
  5/1, "June 14", "14 June", "May", "Friday");
* names: capitalised words after the first (Postgres, Rome, Honda Civic), consecutive ones as
  one name.

The frame is the normalised text with every figure replaced by "#" and every name by "_".
Two facts whose values differ are never the same fact said again. When they share the frame
and the names and differ only in figures, they are one thing whose value changed ("2 kids" →
"3 kids", "JIRA-4411 → JIRA-9983 for the login bug"); when a name differs ("flight to Rome is
AZ611" / "flight to Oslo is SK1470") or the frame does ("checking account 1234" / "also ...
savings account 5678"), they are two things.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from memory_server.memory.facts.shape import normalise

_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december|"
    "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)
_WEEKDAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_ORDINAL = r"\d{1,2}(?:st|nd|rd|th)?"
_YEAR = r"(?:,? \d{4})?"
_DATE = (
    r"\d{4}-\d{1,2}-\d{1,2}|\d{1,2}/\d{1,2}(?:/\d{2,4})?"
    rf"|(?:{_MONTHS})\.? {_ORDINAL}\b{_YEAR}|{_ORDINAL} (?:of )?(?:{_MONTHS})\b{_YEAR}"
    rf"|(?:{_MONTHS}|{_WEEKDAYS})\b{_YEAR}"
)
_NUMBER_WORDS = """zero one two three four five six seven eight nine ten eleven twelve thirteen
fourteen fifteen sixteen seventeen eighteen nineteen twenty"""
_ORDINAL_WORDS = "first second third fourth fifth sixth seventh eighth ninth tenth"
_CARDINAL = {w: str(n) for n, w in enumerate(_NUMBER_WORDS.split())}
_ORDINALS = {
    w: f"{n}{'st' if n == 1 else 'nd' if n == 2 else 'rd' if n == 3 else 'th'}"
    for n, w in enumerate(_ORDINAL_WORDS.split(), start=1)
}
# One pass, longest alternatives first: a date before the number in it, a code before its digits.
_FIGURE_RE = re.compile(
    rf"(?<![\w.-])(?:(?P<date>{_DATE})"
    r"|(?P<code>(?=[\w-]*\d)(?=[\w-]*[A-Za-z])[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*)"
    r"|(?P<number>[$€£]?\d+(?:[.,:]\d+)*(?:st|nd|rd|th|%)?)"
    rf"|(?P<word>{'|'.join(_CARDINAL)}|{'|'.join(_ORDINALS)}))(?![\w-])",
    re.IGNORECASE,
)
_DAY_SUFFIX_RE = re.compile(r"(\d)(?:st|nd|rd|th)\b")
_PRONOUN_RE = re.compile(r"I(?:'\w+)?")  # "Yesterday I ran", "so I'm": no name
_NAME_RE = re.compile(r"(?<![\w'-])[A-Z][\w'&.-]*(?: [A-Z][\w'&.-]*)*")
# Words that say the value changed, not what the fact is about ("Has 3 kids now").
_FILLERS = frozenset(["now", "actually", "currently", "instead", "still"])


@dataclass(frozen=True, slots=True)
class Values:
    """A fact's values (lower case, in order) and its frame (see the module doc)."""

    frame: str
    names: tuple[str, ...] = ()
    figures: tuple[str, ...] = ()
    words: frozenset[str] = frozenset()  # every word of the text, lower case


@functools.lru_cache(maxsize=16384)
def values_of(text: str) -> Values:
    text = text.replace("’", "'")
    names: list[str] = []
    figures: list[str] = []
    out: list[str] = []
    at = 0
    for m in _FIGURE_RE.finditer(text):
        out.append(_names(text[at : m.start()], names, first=at == 0))
        token = m[0].casefold()
        if m["date"]:  # "June 14th" = "June 14"
            token = _DAY_SUFFIX_RE.sub(r"\1", token)
        figures.append(_CARDINAL.get(token) or _ORDINALS.get(token) or token.replace(",", ""))
        out.append(" # ")
        at = m.end()
    out.append(_names(text[at:], names, first=at == 0))
    frame = " ".join(w for w in normalise("".join(out)).split() if w not in _FILLERS)
    return Values(frame, tuple(names), tuple(figures), frozenset(normalise(text).split()))


def _names(segment: str, names: list[str], *, first: bool) -> str:
    """`segment` with its names replaced by "_" (a text's first word is no name: facts start
    with a capital)."""
    out: list[str] = []
    at = 0
    for m in _NAME_RE.finditer(segment):
        start, end = m.start(), m.start() + len(m[0].rstrip("."))
        if first and not segment[:start].strip():
            head, space, _ = m[0].partition(" ")  # "Will Use" → no name; "Postgres Pro" → "Pro"
            start += len(head) + len(space)
            if start >= end:
                continue
        if _PRONOUN_RE.fullmatch(segment[start:end]):
            continue
        out.append(segment[at:start] + " _ ")
        names.append(segment[start:end].casefold())
        at = end
    out.append(segment[at:])
    return "".join(out)


def differ(a: Values, b: Values) -> bool:
    """True when the two texts name different values: never the same fact said again."""
    return sorted(a.figures) != sorted(b.figures) or _other_names(a, b)


def changed(new: Values, old: Values) -> bool:
    """True when `new` is `old` with a changed figure: the same frame and names, and at least
    one figure different."""
    return (
        bool(new.figures)
        and new.frame == old.frame
        and new.figures != old.figures
        and not _other_names(new, old)
    )


def introduces(new: Values, old: Values) -> bool:
    """True when `new` names a figure or a name `old` does not: then it is not `old` said
    again, however many words they share ("Python 3.12" after "Python 3.11"). What only `old`
    names does not count ("bullet points" after "bullet points for GSQL answers")."""
    return bool(set(new.figures) - set(old.figures)) or any(
        not set(n.split()) & old.words for n in new.names
    )


def _other_names(a: Values, b: Values) -> bool:
    """Whether either text names someone or something the other does not mention at all
    ("Rome" / "Oslo"; not "Jazz" / "jazz", nor "Priya Raman" / "Priya")."""
    return any(not set(n.split()) & b.words for n in a.names) or any(
        not set(n.split()) & a.words for n in b.names
    )
