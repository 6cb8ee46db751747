"""Passwords, passphrases, PINs and passcodes stated in prose, in the word orders people use:
"the PIN for my card is 4821", "my login password? it's Tr0ub4dor&3", "hunter2Xy! is my
password", "I log in with hunter2Xy! as my password", "use 'a b c' as the passphrase".

A phrase alone is not enough: its value must look like a secret rather than like a word of the
sentence (quoted, or holding a digit, a symbol or mixed case; a PIN is digits), so "I forgot my
password yesterday" and "reset my password please" stay. The assignment forms ("password:
X", "pw=X") and "my password is X" are secret_patterns' PW_* regexes; these add the rest."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final

from memory_server.extraction.secret_patterns import is_placeholder, looks_like_password

__all__ = ["prose_password_spans"]

_KW = r"pass(?:word|wd|phrase|code)s?|pwd|pins?(?:\s+(?:code|number))?"
_VALUE = r"""(?:(?P<q>["'`‘“])(?P<qval>[^"'`‘’“”\n]{1,200}?)["'`’”]|(?P<val>[^\s"'`]{1,200}))"""
_OWNER = r"my|our|his|her|their|your|the|a|an|this|that"
# Nouns after the key word that make it something about a password, not the password itself:
# "1Password is my password manager".
_NOT_THE_SECRET = (
    r"(?!\s+(?:manager|managers|policy|policies|field|hint|hints|reset|rules?|length|prompt|"
    r"hash|app|vault|strength|change|requirements?|protection|protected|generator|"
    r"screen|page|form|box|expir\w*|entry|code\s+generator))"
)
# Between the key word and its value: "for my card", "to the wifi", "I use", "I picked".
_AFTER_KW = (
    r"(?:\s+(?:for|to|of|on|at|in|into)\s+(?:[\w@.:/-]+\s+){0,2}[\w@.:/-]+){0,2}"
    r"(?:\s+(?:i|we|you)\s+(?:use|used|chose|picked|set|have|had|gave)\b)?"
)
_COPULA = (
    r"(?:'s|’s|\s*[?:,]?\s*(?:it'?s|it’s|it\s+is|that'?s|that\s+is|is\s+now|is\s+set\s+to|"
    r"is|was|will\s+be|=|:|-+>?|—))"
)

# Key word, then its value: "the PIN for my card is 4821", "passcode? it's X".
_KW_THEN_VALUE: Final = re.compile(
    rf"(?i)(?<![A-Za-z0-9])(?P<kw>{_KW})(?![A-Za-z0-9])"
    rf"{_AFTER_KW}{_COPULA}\s*:?\s*{_VALUE}"
)
# Value, then the key word: "hunter2Xy! is my password", "X, that's the wifi password".
_VALUE_THEN_KW: Final = re.compile(
    rf"(?i)(?<![^\s(\[]){_VALUE}\s*,?\s+(?:is|was|will\s+be|that'?s|which\s+is|—|-+|=)\s+"
    rf"(?:(?:{_OWNER})\s+)?(?:[\w-]+\s+){{0,2}}(?P<kw>{_KW})(?![A-Za-z0-9]){_NOT_THE_SECRET}"
)
# "I log in with X as my password", "use X as the passphrase".
_VALUE_AS_KW: Final = re.compile(
    rf"(?i)(?<![^\s(\[]){_VALUE}\s+as\s+(?:(?:{_OWNER})\s+)?(?:[\w-]+\s+){{0,2}}"
    rf"(?P<kw>{_KW})(?![A-Za-z0-9]){_NOT_THE_SECRET}"
)
# "PIN 4821", "pin code: 4821", "PIN#4821": a PIN needs no copula when its value is digits.
_PIN_DIGITS: Final = re.compile(
    r"(?i)(?<![A-Za-z0-9])pin(?:\s+(?:code|number))?\s*[:=#]?\s*(?P<val>\d{4,12})(?!\w|[.,-]\d)"
)
_PIN_VALUE: Final = re.compile(r"\d{4,12}")
_TRAILING: Final = ".,;:?!)]"
_PROSE_PATTERNS: Final = (_KW_THEN_VALUE, _VALUE_THEN_KW, _VALUE_AS_KW)


def prose_password_spans(line: str) -> Iterator[tuple[int, int]]:
    """(start, end) of each password, passphrase, PIN or passcode stated in the line."""
    for pattern in _PROSE_PATTERNS:
        for found in pattern.finditer(line):
            group = "qval" if found.group("qval") is not None else "val"
            value = found.group(group)
            if _is_secret_value(value, found.group("kw"), quoted=group == "qval"):
                start, end = found.span(group)
                yield start, end - (len(value) - len(_bare(value, group == "qval")))
    for found in _PIN_DIGITS.finditer(line):
        yield found.span("val")


def _bare(value: str, quoted: bool) -> str:
    if quoted:
        return value
    # "hunter2Xy!" keeps its "!" unless it ends a longer run of closing punctuation.
    stripped = value.rstrip(".,;:?)]")
    return stripped if stripped else value


def _is_secret_value(value: str, keyword: str, *, quoted: bool) -> bool:
    value = value.strip() if quoted else _bare(value, False)
    if is_placeholder(value) or "://" in value or value.startswith(("/", "~")):
        return False
    if keyword.lower().startswith("pin"):
        # A PIN is its digits; "the pin is 3mm wide" or "pin is loose" are not PINs.
        return bool(_PIN_VALUE.fullmatch(value.strip(_TRAILING)))
    if quoted:
        return len(value) >= 4
    return looks_like_password(value)
