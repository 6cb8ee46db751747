"""SecretFilter on top of Yelp's detect-secrets: drops every sentence (or line) holding a secret.

detect-secrets is built to scan files in a repository, and its ad-hoc entry point
(`detect_secrets.core.scan.scan_line`) is a poor fit for chat text: it reads and rewrites the
process-wide settings singleton on every call, skips the entropy plugins' threshold (every word
becomes a candidate), reports only part of some secrets (the `ghp` of a GitHub token, a JWT without
its signature) and knows nothing of prose ("my password is hunter2!"). So this module uses the
library's parts directly:

* the regex detectors (`RegexBasedDetector.denylist`), run with `finditer` so that we get positions,
  each hit widened to the whole whitespace-delimited token;
* the keyword detector's quoted-assignment regexes (`api_key = "..."`);
* the entropy plugins' Shannon entropy and limits, applied here;
* the `is_potential_uuid` / `is_sequential_string` / `is_templated_secret` heuristics;

and adds what chat messages need: whole PEM blocks across lines, bearer and basic credentials,
newer provider key shapes (`sk-proj-`, `sk-ant-`, `github_pat_`, ...), password phrases, and
Luhn-checked card numbers.

The plugin list is fixed here, never read from a baseline or the global settings, so behaviour does
not depend on the environment; verification (network calls) never runs because no code path here
calls `analyze_line` or `verify`.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from re import Match, Pattern
from typing import Final

from detect_secrets.filters.heuristic import is_potential_uuid, is_sequential_string
from detect_secrets.plugins import keyword as ds_keyword
from detect_secrets.plugins.basic_auth import BasicAuthDetector
from detect_secrets.plugins.high_entropy_strings import (
    Base64HighEntropyString,
    HexHighEntropyString,
)
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.private_key import PrivateKeyDetector

from memory_server.extraction.secret_patterns import (
    BASE64_ENTROPY_LIMIT,
    CANDIDATE_TOKEN,
    CARD,
    HASH_CONTEXT,
    HEX,
    HEX_ENTROPY_LIMIT,
    ID_PREFIX,
    KEY_CONTEXT,
    KEY_CONTEXT_REACH,
    KEYWORD_PREFILTER,
    PEM_BEGIN,
    PEM_END,
    PROVIDER_PATTERNS,
    PW_ASSIGN,
    PW_BARE,
    PW_CHANGED,
    PW_IS,
    REGEX_DETECTORS,
    SSH_PUBLIC_KEY,
    is_card_number,
    is_jwt,
    is_placeholder,
    looks_like_identifier,
    looks_like_password,
    looks_like_path,
    plausible_password,
)
from memory_server.extraction.secret_prose import prose_password_spans
from memory_server.extraction.secret_spans import (
    drop_segments,
    merge,
    secret_span,
    token_around,
    windows,
)
from memory_server.memory.ports import Scrubbed

__all__ = ["DetectSecretsFilter", "placeholder"]

logger = logging.getLogger(__name__)

# The provider and regex detectors only ever report a token that is long, holds a digit, or
# sits next to a credential word; a line with none of these skips them (they are most of the
# filter's time on ordinary chat text, which is what every stored message is). Substring tests
# on the lower-cased line: a case-insensitive alternation costs three times as much.
_GATE_WORDS: Final = (
    "key",  # also AccountKey=, SharedAccessKey=, secret_access_key, api_key
    "pw",
    "pass",
    "token",
    "secret",
    "authoriz",
    "bearer",
    "sig=",
    "://",  # user:password@host
    "@",
)
_GATE_TOKEN: Final = re.compile(r"\S{10,}")
_FOUR_DIGITS: Final = re.compile(r"\d{4}")
_LONG_TOKEN: Final = re.compile(r"[A-Za-z0-9+/_-]{16}")

# What a stored message says in place of a secret; the words name its type, never its value.
_PLACEHOLDER: Final = re.compile(r"\[redacted: [a-z ]+\]")


def placeholder(kind: str) -> str:
    """`[redacted: <type>]` for a detector's kind."""
    k = kind.lower()
    if "private key" in k:
        label = "private key"
    elif "aws" in k:
        label = "aws key"
    elif "password" in k or "basic auth" in k or "credentials" in k:
        label = "password"
    elif "card" in k:
        label = "card number"
    elif "token" in k or "jwt" in k or "authorization" in k:
        label = "token"
    elif "key" in k or "secret" in k or "sas" in k:
        label = "api key"
    else:
        label = "secret"
    return f"[redacted: {label}]"


@dataclass(frozen=True, slots=True)
class _Hit:
    start: int
    end: int
    kind: str


class DetectSecretsFilter:
    """SecretFilter: drops each sentence or line of a message that holds a secret.

    `scrub(text)` returns the text without those sentences (untouched lines keep their exact
    bytes) and `secrets_found`, the number of distinct secrets: reports of several detectors that
    overlap (a JWT after "Bearer" is also high-entropy) count once, a PEM block counts once.

    Build it once (it compiles a few dozen regular expressions) and share it. `scrub` is
    synchronous, pure CPU (about a millisecond per KB, linear in the input) and thread-safe: it
    only reads immutable state, never touches detect-secrets' global settings, and never calls
    the network.
    """

    def __init__(self) -> None:
        patterns: list[tuple[str, Pattern[str]]] = []
        for detector_type in REGEX_DETECTORS:
            detector = detector_type()
            kind = str(detector.secret_type)
            patterns.extend((kind, regex) for regex in detector.denylist)
        patterns.extend((kind, re.compile(source)) for kind, source in PROVIDER_PATTERNS)
        self._patterns: tuple[tuple[str, Pattern[str]], ...] = tuple(patterns)
        self._pem_markers: tuple[Pattern[str], ...] = (
            *PrivateKeyDetector().denylist,
            PEM_BEGIN,
        )
        # Quoted assignments only: in prose the unquoted forms match "secret: graphs are fun".
        self._keyword_patterns: tuple[tuple[Pattern[str], int], ...] = tuple(
            ds_keyword.QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP.items()
        )
        self._base64 = Base64HighEntropyString(limit=BASE64_ENTROPY_LIMIT)
        self._hex = HexHighEntropyString(limit=HEX_ENTROPY_LIMIT)

    def scrub(self, text: str) -> Scrubbed:
        if not text:
            return Scrubbed(text=text, secrets_found=0)
        hits = self._find(text)
        # A message stored redacted still drops the sentence that held the secret: "my key is
        # [redacted: api key]" is not a fact about the user either.
        hits += [_Hit(m.start(), m.end(), "redacted") for m in _PLACEHOLDER.finditer(text)]
        if not hits:
            return Scrubbed(text=text, secrets_found=0)
        spans = merge((hit.start, hit.end) for hit in hits)
        kept, dropped = drop_segments(text, spans)
        # Kinds and counts only: the text and the secrets never reach the log.
        kinds = Counter(hit.kind for hit in hits)
        logger.debug(
            "scrubbed %d secret(s), %d sentence(s) dropped; detectors: %s",
            len(spans),
            dropped,
            ", ".join(f"{kind}={n}" for kind, n in sorted(kinds.items())),
        )
        return Scrubbed(text=kept, secrets_found=len(spans))

    def redact(self, text: str) -> Scrubbed:
        """The text with each secret replaced by a typed placeholder (`[redacted: api key]`),
        everything else byte for byte; `secrets_found` counts them as `scrub` does."""
        if not text:
            return Scrubbed(text=text, secrets_found=0)
        hits = self._find(text)
        if not hits:
            return Scrubbed(text=text, secrets_found=0)
        spans = merge((hit.start, hit.end) for hit in hits)
        parts: list[str] = []
        position = 0
        for start, end in spans:
            # The span's type: the detector that reported the longest part of it.
            kind = max(
                (h for h in hits if h.start < end and start < h.end),
                key=lambda h: min(h.end, end) - max(h.start, start),
            ).kind
            # A sentence's full stop or comma after the token stays (the token was widened
            # over it); a lone trailing dot is not what keeps a secret secret.
            while (
                end - 1 > start
                and text[end - 1] in ".,;:"
                and (end == len(text) or text[end].isspace())
            ):
                end -= 1
            parts += [text[position:start], placeholder(kind)]
            position = end
        parts.append(text[position:])
        logger.debug("redacted %d secret(s) from a message", len(spans))
        return Scrubbed(text="".join(parts), secrets_found=len(spans))

    def _find(self, text: str) -> list[_Hit]:
        hits = list(self._pem_hits(text))
        offset = 0
        for line in text.split("\n"):
            if line.strip():
                for start, end in windows(line):
                    hits.extend(self._line_hits(line[start:end], offset + start))
            offset += len(line) + 1
        return hits

    def _pem_hits(self, text: str) -> Iterator[_Hit]:
        # The whole block goes, not only the BEGIN line the detector reports: the base64 body
        # lines are the secret. A block without an END line (pasted truncated) runs to the end.
        position = 0
        while True:
            first: Match[str] | None = None
            for marker in self._pem_markers:
                found = marker.search(text, position)
                if found and (first is None or found.start() < first.start()):
                    first = found
            if first is None:
                return
            start = first.start()
            while start > 0 and text[start - 1] == "-":
                start -= 1
            end_marker = PEM_END.search(text, first.end())
            end = end_marker.end() if end_marker else len(text)
            yield _Hit(start, end, "Private Key")
            position = end

    def _line_hits(self, line: str, offset: int) -> Iterator[_Hit]:
        lower = line.lower()
        if _may_hold_pattern(line, lower):
            yield from self._pattern_hits(line, offset)
        if "pass" in lower or "pw" in lower or "pin" in lower:  # every password pattern needs one
            yield from self._password_hits(line, offset)
        if any(q in line for q in "\"'`"):  # the keyword patterns are quoted assignments
            yield from self._keyword_hits(line, offset)
        if _FOUR_DIGITS.search(line):  # a card number starts with four digits
            yield from self._card_hits(line, offset)
        if _LONG_TOKEN.search(line):  # entropy candidates are 16 characters or more
            yield from self._entropy_hits(line, offset)

    def _pattern_hits(self, line: str, offset: int) -> Iterator[_Hit]:
        for kind, regex in self._patterns:
            token_end = 0
            for found in regex.finditer(line):
                if found.start() < token_end:
                    continue  # inside the token already reported; widening it again is quadratic
                start, end = token_around(line, *secret_span(found))
                token_end = end
                if kind == JwtTokenDetector.secret_type and not is_jwt(line[start:end]):
                    continue
                if kind == BasicAuthDetector.secret_type and is_placeholder(found.group(1)):
                    continue
                yield _Hit(offset + start, offset + end, kind)

    def _password_hits(self, line: str, offset: int) -> Iterator[_Hit]:
        for found in PW_ASSIGN.finditer(line):
            # "password_hash: bcrypt" names something about a password, not the password itself.
            strong = found.group("kw") is not None and not found.group("suffix")
            if plausible_password(found, strong=strong):
                yield _value_hit(found, offset, "password")
        for found in PW_IS.finditer(line):
            if plausible_password(found, strong=found.group("owner") is not None):
                yield _value_hit(found, offset, "password")
        for found in PW_BARE.finditer(line):
            if plausible_password(found, strong=False):
                yield _value_hit(found, offset, "password")
        for found in PW_CHANGED.finditer(line):
            if plausible_password(found, strong=found.group("owner") is not None):
                yield _value_hit(found, offset, "password")
        for start, end in prose_password_spans(line):
            yield _Hit(offset + start, offset + end, "password")

    def _keyword_hits(self, line: str, offset: int) -> Iterator[_Hit]:
        # detect-secrets' KeywordDetector regexes (`api_key = "..."`, `"secret": "..."`). Its
        # value group also matches code such as `token = "{}".format(x)`, hence the shape check.
        if not KEYWORD_PREFILTER.search(line) or not any(q in line for q in "\"'`"):
            return
        for regex, group in self._keyword_patterns:
            for found in regex.finditer(line):
                value = found.group(group)
                if value and looks_like_password(value) and not is_placeholder(value):
                    yield _Hit(offset + found.start(group), offset + found.end(group), "keyword")

    def _card_hits(self, line: str, offset: int) -> Iterator[_Hit]:
        for found in CARD.finditer(line):
            digits = re.sub(r"[ -]", "", found.group(0))
            if is_card_number(digits):
                yield _Hit(offset + found.start(), offset + found.end(), "card-number")

    def _entropy_hits(self, line: str, offset: int) -> Iterator[_Hit]:
        contexts: list[int] | None = None  # keyword end positions, found only when needed
        for found in CANDIDATE_TOKEN.finditer(line):
            token = found.group(0).rstrip("=")
            if len(token) < 16 or is_potential_uuid(token) or is_sequential_string(token):
                continue
            if token.startswith("AAAA") and SSH_PUBLIC_KEY.search(line, 0, found.start()):
                continue
            if self._is_random_key(token):
                yield _Hit(offset + found.start(), offset + found.end(), "high-entropy")
                continue
            if contexts is None:
                contexts = [m.end() for m in KEY_CONTEXT.finditer(line)]
            near_keyword = any(0 <= found.start() - end <= KEY_CONTEXT_REACH for end in contexts)
            if near_keyword and self._is_keyed_secret(token, line[: found.start()]):
                yield _Hit(offset + found.start(), offset + found.end(), "keyword-entropy")

    def _is_random_key(self, token: str) -> bool:
        # Without context only a long mixed-case alphanumeric token above detect-secrets' base64
        # limit counts: hex (commit hashes, digests), ULIDs and numbers are left alone.
        if len(token) < 20 or looks_like_path(token):
            return False
        # Object ids carry a lower-case type prefix (req_01HV8Z..., cus_NffrFe...); only the
        # random part counts, so an upper-case ULID after "req_" is not "mixed case".
        token = ID_PREFIX.sub("", token)
        has_classes = (
            any(c.islower() for c in token)
            and any(c.isupper() for c in token)
            and any(c.isdigit() for c in token)
        )
        entropy = self._base64.calculate_shannon_entropy(token)
        return has_classes and entropy > self._base64.entropy_limit

    def _is_keyed_secret(self, token: str, before: str) -> bool:
        # Next to "key", "token", "secret"... a shorter or less random token is enough, but it
        # must still look random: letters and digits, no path, no snake_case identifier.
        if not (any(c.isalpha() for c in token) and any(c.isdigit() for c in token)):
            return False
        if looks_like_path(token) or looks_like_identifier(token):
            return False
        if HEX.fullmatch(token):
            if HASH_CONTEXT.search(before):
                return False
            return len(token) >= 32 and (
                self._hex.calculate_shannon_entropy(token) > self._hex.entropy_limit
            )
        return self._base64.calculate_shannon_entropy(token) > 3.5


def _may_hold_pattern(line: str, lower: str) -> bool:
    if any(word in lower for word in _GATE_WORDS):
        return True
    for found in _GATE_TOKEN.finditer(line):
        token = found.group(0)
        if len(token) >= 16 or any(c.isdigit() for c in token):
            return True
    return False


def _value_hit(found: Match[str], offset: int, kind: str) -> _Hit:
    group = "qval" if found.group("qval") is not None else "val"
    return _Hit(offset + found.start(group), offset + found.end(group), kind)
