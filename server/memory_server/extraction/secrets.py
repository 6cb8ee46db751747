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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from re import Match, Pattern
from typing import Final

from detect_secrets.filters.heuristic import (
    is_potential_uuid,
    is_sequential_string,
    is_templated_secret,
)
from detect_secrets.plugins import keyword as ds_keyword
from detect_secrets.plugins.artifactory import ArtifactoryDetector
from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.basic_auth import BasicAuthDetector
from detect_secrets.plugins.cloudant import CloudantDetector
from detect_secrets.plugins.discord import DiscordBotTokenDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.high_entropy_strings import (
    Base64HighEntropyString,
    HexHighEntropyString,
)
from detect_secrets.plugins.ibm_cloud_iam import IbmCloudIamDetector
from detect_secrets.plugins.ibm_cos_hmac import IbmCosHmacDetector
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.private_key import PrivateKeyDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.softlayer import SoftlayerDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
from detect_secrets.plugins.twilio import TwilioKeyDetector

from memory_server.memory.ports import Scrubbed

__all__ = ["DetectSecretsFilter"]

logger = logging.getLogger(__name__)

# Importing detect-secrets runs `logging.captureWarnings(True)` (detect_secrets.core.log), which
# would reroute every warning of the process to the "py.warnings" logger; nothing here relies on it.
logging.captureWarnings(False)

# detect-secrets' defaults (the values its CLI and baselines use).
BASE64_ENTROPY_LIMIT: Final = 4.5
HEX_ENTROPY_LIMIT: Final = 3.0

# Left out on purpose: IPPublicDetector (an IP address is not a credential); PrivateKeyDetector
# (it marks only the BEGIN line; `_pem_hits` takes the whole block); and OpenAIDetector,
# JwtTokenDetector and NpmDetector, whose regexes backtrack quadratically on long runs such as
# "sk-sk-sk-..." or "////..." (100+ ms for 8 KB): `_PROVIDER_PATTERNS` has linear equivalents.
_REGEX_DETECTORS: Final[tuple[type[RegexBasedDetector], ...]] = (
    ArtifactoryDetector,
    AWSKeyDetector,
    AzureStorageKeyDetector,
    BasicAuthDetector,
    CloudantDetector,
    DiscordBotTokenDetector,
    GitHubTokenDetector,
    GitLabTokenDetector,
    IbmCloudIamDetector,
    IbmCosHmacDetector,
    MailchimpDetector,
    PypiTokenDetector,
    SendGridDetector,
    SlackDetector,
    SoftlayerDetector,
    SquareOAuthDetector,
    StripeDetector,
    TelegramBotTokenDetector,
    TwilioKeyDetector,
)

# Key shapes detect-secrets 1.5.0 misses (it only knows legacy OpenAI keys with "T3BlbkFJ", classic
# GitHub tokens, live Stripe keys). The lookaheads demand a digit (and for `sk-` an upper-case
# letter) because real keys always have them and prose such as "sk-learn-pipeline" does not;
# they look at most 256 characters ahead so that a long run of "sk-sk-sk-" stays linear.
_PROVIDER_PATTERNS: Final[tuple[tuple[str, str], ...]] = (
    ("anthropic-key", r"(?<![\w-])sk-ant-[a-z]{3,6}\d{2}-[A-Za-z0-9_-]{20,}"),
    ("openai-key", r"(?<![\w-])sk-(?=[\w-]{0,256}?\d)(?=[\w-]{0,256}?[A-Z])[A-Za-z0-9_-]{20,}"),
    ("github-token", r"(?<![\w-])(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})"),
    ("slack-token", r"(?<![\w-])(?:xox[a-z](?:-[A-Za-z0-9]+){2,}|xapp-\d-[A-Za-z0-9-]{20,})"),
    (
        "stripe-key",
        r"(?<![\w-])(?:(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9]{24,})",
    ),
    ("google-api-key", r"(?<![\w-])AIza[0-9A-Za-z_-]{35}"),
    ("google-oauth", r"(?<![\w-])(?:GOCSPX-[A-Za-z0-9_-]{20,}|ya29\.[0-9A-Za-z_-]{20,})"),
    ("huggingface-token", r"(?<![\w-])hf_(?=[A-Za-z]{0,256}?[\dA-Z])[A-Za-z0-9]{30,}"),
    ("npm-token", r"(?<![\w-])npm_[A-Za-z0-9]{36}|_authToken\s*=\s*[^\s$]{8,}"),
    # Validated by `_is_jwt` with detect-secrets' JwtTokenDetector.is_formally_valid.
    (JwtTokenDetector.secret_type, r"(?<![\w-])eyJ[A-Za-z0-9_=-]+\.[A-Za-z0-9_=-]+"),
    ("azure-client-secret", r"(?<![\w~.-])[A-Za-z0-9_~.-]{3}\dQ~[A-Za-z0-9_~.-]{31,34}"),
    # Credentials in any URL; detect-secrets' BasicAuthDetector needs a non-empty user name
    # ("redis://:pass@cache" has none). Group 1 is checked for placeholders like BasicAuth's.
    (BasicAuthDetector.secret_type, r"(?i)\b[a-z][a-z0-9+.-]{1,20}://[^\s:/@]*:([^\s/@]{1,200})@"),
    ("azure-sas", r"(?<![A-Za-z0-9])sig=[A-Za-z0-9%+/=]{20,}"),
    ("azure-key", r"(?i)(?:SharedAccessKey|AccountKey)\s*=\s*[A-Za-z0-9+/=]{20,}"),
    # "Authorization: Basic dXNlcjpodW50ZXIy", "Authorization: Bearer <token>", "Bearer <token>".
    (
        "authorization",
        r"(?i)\bauthorization\b[\"']?\s*[:=]\s*[\"']?(?:basic|bearer|token|digest)?\s*"
        r"(?=[A-Za-z0-9._~+/=-]{0,256}?\d)[A-Za-z0-9._~+/=-]{12,}",
    ),
    ("bearer-token", r"(?i)\bbearer\s+(?=[A-Za-z0-9._~+/-]{0,256}?\d)[A-Za-z0-9._~+/-]{16,}=*"),
)

# Password phrases. `_PW` may carry affixes (DB_PASSWORD, passwordHash); `_PW_SHORT` may not,
# except a `prefix_` (DB_PASS, mysql_pw), because bare "pass" and "pw" are common words.
_PW = r"pass(?:word|wd|phrase|code)|pwd"
_PW_SHORT = r"pass|pw"
_VALUE = r"""(?:(?P<q>["'`])(?P<qval>[^"'`\n]{1,200}?)(?P=q)|(?P<val>[^\s"'`]{1,200}))"""
_PW_ASSIGN: Final = re.compile(
    rf"(?i)(?<![A-Za-z0-9])(?:[A-Za-z0-9_.-]{{0,40}}?(?P<kw>{_PW})(?P<suffix>[A-Za-z0-9_.-]{{0,40}})"
    rf"|(?:[A-Za-z0-9]{{1,20}}[_.-])?(?:{_PW_SHORT})(?![A-Za-z0-9]))"
    rf"[\"'\]]*\s*(?::=|=>|==|->|[:=])\s*{_VALUE}"
)
_OWNER = (
    r"my|our|his|her|their|the\s+new|new|root|admin|wifi|wi-fi|db|database|account|login|"
    r"vault|master|sudo|temporary|temp|default|current|old"
)
_PW_IS: Final = re.compile(
    rf"(?i)(?<![A-Za-z0-9])(?:(?P<owner>{_OWNER})\s+(?:[\w@.-]+\s+)?)?(?:{_PW}|pass|pw)"
    r"(?:\s+(?:for|to|of|on|at|in)\s+(?:[\w@.:/-]+\s+){0,2}[\w@.:/-]+){0,2}"
    r"\s+(?:is|was|will\s+be|is\s+now|is\s+set\s+to|has\s+been\s+(?:changed|set|reset)\s+to|"
    r"(?:changed|set|reset|updated)\s+to)\s*:?\s*"
    rf"{_VALUE}"
)
_PW_BARE: Final = re.compile(rf"(?i)(?<![A-Za-z0-9])(?:{_PW})\s+{_VALUE}")
# "I changed my wifi password to Summer2024".
_PW_CHANGED: Final = re.compile(
    r"(?i)\b(?:changed|changing|change|set|setting|reset|resetting|updated|update)\s+"
    rf"(?P<owner>(?:my|our|the|his|her|their)\s+)?(?:[\w@.-]+\s+)?(?:{_PW}|pass|pw)\s+to\s+"
    rf"{_VALUE}"
)

# Words that follow "password is" / "password:" in ordinary sentences about passwords.
_NOT_A_PASSWORD: Final = frozenset(
    """
    a an the is was be been being to for of on in at by with without from and or not no too very
    so as if it its this that these those there here my your our their his her set
    stored required incorrect wrong invalid expired correct missing empty hashed encrypted changed
    needed necessary optional mandatory protected secure insecure weak strong long short same
    different case sensitive managed rotated saved kept generated random unknown blank null none
    hidden masked redacted shown visible secret safe ok okay fine good bad working broken forgotten
    lost below above following something nothing still also just only never always usually
    probably now then must should can cannot could will would has have had needs contains does
    doesn't isn't wasn't won't can't did didn't field hash policy manager prompt reset length
    expiry expiration rules requirements authentication login change update updated valid
    what which who how when where why it's n/a see check ask use true false nil
    undefined string str text bytes varchar char int integer number bool boolean optional any
    secretstr type
    """.split()  # noqa: SIM905
)
_PLACEHOLDER_HINTS: Final = (
    "password",
    "passwd",
    "example",
    "placeholder",
    "redacted",
    "your_",
    "your-",
    "yourpass",
    "os.environ",
    "getenv",
    "env(",
    "secret_here",
)
_REFERENCE: Final = re.compile(r"^[A-Za-z_][A-Za-z_]*(?:\.[A-Za-z_][A-Za-z_]*)+$")

# Generic keys: a high-entropy token shortly after one of these words.
# The leading lookahead on the first letters keeps this ~6x faster than the bare alternation.
_KEY_CONTEXT: Final = re.compile(
    r"(?i)(?=[kstcabp])(?:keys?(?![a-z])|secret|token|credential|creds|auth(?!or)|bearer|passw|"
    r"pwd|signature|(?<![a-z])sig(?![a-z]))"
)
# Every regex of detect-secrets' KeywordDetector needs one of these words and a quote; most lines
# have neither, and those regexes are the slowest part of a scan.
_KEYWORD_PREFILTER: Final = re.compile(r"(?i)(?=[kpsc])(?:key|pass|pwd|secret|contrase)")
_KEY_CONTEXT_REACH: Final = 48  # characters between the keyword's end and the token
_HASH_CONTEXT: Final = re.compile(
    r"(?i)\b(?:commit|sha\d*|hash|digest|checksum|revision|rev|md5|etag|git)\b"
)
# '=' only as base64 padding, so that "token=abc..." yields the value, not the assignment.
_CANDIDATE_TOKEN: Final = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{16,}={0,2}")
_CAMEL_PARTS: Final = re.compile(r"[A-Z][a-z]*|[a-z]+|\d+|[^A-Za-z\d]+")
# The base64 body of an SSH *public* key ("ssh-ed25519 AAAAC3Nza..."): not a secret.
_SSH_PUBLIC_KEY: Final = re.compile(r"(?:ssh-[a-z0-9]+|ecdsa-[a-z0-9-]+|sk-ssh-[a-z0-9@.-]+)\s+$")
_HEX: Final = re.compile(r"[0-9a-fA-F]+")
_ID_PREFIX: Final = re.compile(r"^[a-z]{2,12}_")
# A path component: lower-case or camelCase words (one capital per word), or a short code. Each
# repetition starts with a separator or a capital, so a failing match cannot backtrack
# exponentially.
_PATH_PART: Final = re.compile(
    r"[A-Z]?[a-z0-9]+(?:(?:[._-][A-Z]?|[A-Z])[a-z0-9]+)*|[A-Z0-9_.-]{1,8}"
)

# Card numbers: grouped 4-4-4-4(-3), Amex 4-6-5, Diners 4-6-4, or 13-19 contiguous digits.
_CARD: Final = re.compile(
    r"(?<![\w.,-])"
    r"(?:\d{4}([ -])\d{4}\1\d{4}\1\d{4}(?:\1\d{3})?|\d{4}([ -])\d{6}\2\d{4,5}|\d{13,19})"
    r"(?!\w|[.,-]\d)"
)
# (prefix regex, allowed lengths) for the issuers worth knowing; anything else is not a card.
_CARD_ISSUERS: Final[tuple[tuple[Pattern[str], frozenset[int]], ...]] = (
    (re.compile(r"4"), frozenset({13, 16, 19})),  # Visa
    (re.compile(r"5[1-5]|2(?:2[2-9]|[3-6]\d|7[01]|720)"), frozenset({16})),  # Mastercard
    (re.compile(r"3[47]"), frozenset({15})),  # Amex
    (re.compile(r"6(?:011|5|4[4-9]|22)"), frozenset({16, 17, 18, 19})),  # Discover
    (re.compile(r"35(?:2[89]|[3-8])"), frozenset({16, 17, 18, 19})),  # JCB
    (re.compile(r"3(?:0[0-5]|[689])"), frozenset({14, 16, 17, 18, 19})),  # Diners
    (re.compile(r"62"), frozenset({16, 17, 18, 19})),  # UnionPay
)

# detect-secrets' PrivateKeyDetector lists its BEGIN lines one by one and misses PKCS#8
# "ENCRYPTED PRIVATE KEY"; this catches every "BEGIN ... PRIVATE KEY" label.
_PEM_BEGIN: Final = re.compile(r"BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY")
_PEM_END: Final = re.compile(r"-----END [A-Z0-9 ]*-----|Private-MAC:[^\n]*")

# A sentence ends at . ! or ? (maybe closed by a quote or bracket) followed by blanks. Chat text
# is often all lower case, so the next sentence may start with anything; splitting "e.g. this"
# too finely is harmless, because secrets are single tokens or phrases without such stops.
_SENTENCE_BREAK: Final = re.compile(r"(?<=[.!?])[\"')\]]*[ \t]+(?=\S)")
# What a secret token is made of: stop at blanks, quotes, brackets and list separators.
_TOKEN_STOP: Final = frozenset(" \t\r\n\"'`<>(){}[],;|")


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
        for detector_type in _REGEX_DETECTORS:
            detector = detector_type()
            kind = str(detector.secret_type)
            patterns.extend((kind, regex) for regex in detector.denylist)
        patterns.extend((kind, re.compile(source)) for kind, source in _PROVIDER_PATTERNS)
        self._patterns: tuple[tuple[str, Pattern[str]], ...] = tuple(patterns)
        self._pem_markers: tuple[Pattern[str], ...] = (
            *PrivateKeyDetector().denylist,
            _PEM_BEGIN,
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
        if not hits:
            return Scrubbed(text=text, secrets_found=0)
        spans = _merge(hits)
        kept, dropped = _drop_segments(text, spans)
        # Kinds and counts only: the text and the secrets never reach the log.
        kinds = Counter(hit.kind for hit in hits)
        logger.debug(
            "scrubbed %d secret(s), %d sentence(s) dropped; detectors: %s",
            len(spans),
            dropped,
            ", ".join(f"{kind}={n}" for kind, n in sorted(kinds.items())),
        )
        return Scrubbed(text=kept, secrets_found=len(spans))

    def _find(self, text: str) -> list[_Hit]:
        hits = list(self._pem_hits(text))
        offset = 0
        for line in text.split("\n"):
            if line.strip():
                hits.extend(self._line_hits(line, offset))
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
            end_marker = _PEM_END.search(text, first.end())
            end = end_marker.end() if end_marker else len(text)
            yield _Hit(start, end, "Private Key")
            position = end

    def _line_hits(self, line: str, offset: int) -> Iterator[_Hit]:
        for kind, regex in self._patterns:
            token_end = 0
            for found in regex.finditer(line):
                if found.start() < token_end:
                    continue  # inside the token already reported; widening it again is quadratic
                start, end = _token_around(line, *_secret_span(found))
                token_end = end
                if kind == JwtTokenDetector.secret_type and not _is_jwt(line[start:end]):
                    continue
                if kind == BasicAuthDetector.secret_type and _is_placeholder(found.group(1)):
                    continue
                yield _Hit(offset + start, offset + end, kind)
        yield from self._password_hits(line, offset)
        yield from self._keyword_hits(line, offset)
        yield from self._card_hits(line, offset)
        yield from self._entropy_hits(line, offset)

    def _password_hits(self, line: str, offset: int) -> Iterator[_Hit]:
        for found in _PW_ASSIGN.finditer(line):
            # "password_hash: bcrypt" names something about a password, not the password itself.
            strong = found.group("kw") is not None and not found.group("suffix")
            if _plausible_password(found, strong=strong):
                yield _value_hit(found, offset, "password")
        for found in _PW_IS.finditer(line):
            if _plausible_password(found, strong=found.group("owner") is not None):
                yield _value_hit(found, offset, "password")
        for found in _PW_BARE.finditer(line):
            if _plausible_password(found, strong=False):
                yield _value_hit(found, offset, "password")
        for found in _PW_CHANGED.finditer(line):
            if _plausible_password(found, strong=found.group("owner") is not None):
                yield _value_hit(found, offset, "password")

    def _keyword_hits(self, line: str, offset: int) -> Iterator[_Hit]:
        # detect-secrets' KeywordDetector regexes (`api_key = "..."`, `"secret": "..."`). Its
        # value group also matches code such as `token = "{}".format(x)`, hence the shape check.
        if not _KEYWORD_PREFILTER.search(line) or not any(q in line for q in "\"'`"):
            return
        for regex, group in self._keyword_patterns:
            for found in regex.finditer(line):
                value = found.group(group)
                if value and _looks_like_password(value) and not _is_placeholder(value):
                    yield _Hit(offset + found.start(group), offset + found.end(group), "keyword")

    def _card_hits(self, line: str, offset: int) -> Iterator[_Hit]:
        for found in _CARD.finditer(line):
            digits = re.sub(r"[ -]", "", found.group(0))
            if _is_card_number(digits):
                yield _Hit(offset + found.start(), offset + found.end(), "card-number")

    def _entropy_hits(self, line: str, offset: int) -> Iterator[_Hit]:
        contexts: list[int] | None = None  # keyword end positions, found only when needed
        for found in _CANDIDATE_TOKEN.finditer(line):
            token = found.group(0).rstrip("=")
            if len(token) < 16 or is_potential_uuid(token) or is_sequential_string(token):
                continue
            if token.startswith("AAAA") and _SSH_PUBLIC_KEY.search(line, 0, found.start()):
                continue
            if self._is_random_key(token):
                yield _Hit(offset + found.start(), offset + found.end(), "high-entropy")
                continue
            if contexts is None:
                contexts = [m.end() for m in _KEY_CONTEXT.finditer(line)]
            near_keyword = any(0 <= found.start() - end <= _KEY_CONTEXT_REACH for end in contexts)
            if near_keyword and self._is_keyed_secret(token, line[: found.start()]):
                yield _Hit(offset + found.start(), offset + found.end(), "keyword-entropy")

    def _is_random_key(self, token: str) -> bool:
        # Without context only a long mixed-case alphanumeric token above detect-secrets' base64
        # limit counts: hex (commit hashes, digests), ULIDs and numbers are left alone.
        if len(token) < 20 or _looks_like_path(token):
            return False
        # Object ids carry a lower-case type prefix (req_01HV8Z..., cus_NffrFe...); only the
        # random part counts, so an upper-case ULID after "req_" is not "mixed case".
        token = _ID_PREFIX.sub("", token)
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
        if _looks_like_path(token) or _looks_like_identifier(token):
            return False
        if _HEX.fullmatch(token):
            if _HASH_CONTEXT.search(before):
                return False
            return len(token) >= 32 and (
                self._hex.calculate_shannon_entropy(token) > self._hex.entropy_limit
            )
        return self._base64.calculate_shannon_entropy(token) > 3.5


def _secret_span(found: Match[str]) -> tuple[int, int]:
    # Regexes with groups mark the secret with the last group that matched (the whole match
    # can include the variable name); the rest mark it with the whole match.
    for index in range(found.re.groups, 0, -1):
        if found.group(index):
            return found.span(index)
    return found.span()


def _token_around(line: str, start: int, end: int) -> tuple[int, int]:
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


def _is_jwt(token: str) -> bool:
    parts = token.strip(".").split(".")
    return len(parts) >= 2 and JwtTokenDetector.is_formally_valid(".".join(parts[:2]))


def _value_hit(found: Match[str], offset: int, kind: str) -> _Hit:
    group = "qval" if found.group("qval") is not None else "val"
    return _Hit(offset + found.start(group), offset + found.end(group), kind)


def _plausible_password(found: Match[str], *, strong: bool) -> bool:
    quoted = found.group("qval") is not None
    value = found.group("qval") if quoted else found.group("val")
    value = value.strip() if quoted else value.rstrip(".,;:?)")
    if len(value) < 4 or _is_placeholder(value):
        return False
    if quoted:
        return True
    if value.lower() in _NOT_A_PASSWORD or "://" in value or value.startswith(("/", "~")):
        return False
    return strong or _looks_like_password(value)


def _looks_like_password(value: str) -> bool:
    # A digit, a symbol other than word separators, or mixed case beyond a capital first letter
    # (so "Secret" and "STRING" do not count, "hUnter" does).
    return len(value) >= 4 and (
        any(c.isdigit() for c in value)
        or any(not c.isalnum() and c not in "-_. " for c in value)
        or (any(c.isupper() for c in value[1:]) and any(c.islower() for c in value))
    )


def _is_placeholder(value: str) -> bool:
    stripped = value.strip()
    if not stripped or is_templated_secret(stripped) or stripped[0] in "$%<{":
        return True
    if set(stripped) <= set("*xX.-_#?"):
        return True
    lowered = stripped.lower()
    if any(hint in lowered for hint in _PLACEHOLDER_HINTS):
        return True
    # `password = settings.db_password`, `pwd = get_secret()`: references, not values.
    return bool(_REFERENCE.match(stripped)) or "(" in stripped or "[" in stripped


def _looks_like_path(token: str) -> bool:
    if "/" not in token:
        return False
    parts = [part for part in token.split("/") if part]
    return all(_PATH_PART.fullmatch(part) for part in parts)


def _looks_like_identifier(token: str) -> bool:
    # CamelCase names (Argon2PasswordHasher) and snake_case / kebab-case names with short
    # numeric parts (max_tokens_2048, gpt-4o-mini-2024).
    parts = _CAMEL_PARTS.findall(token)
    words = [part for part in parts if part[0].isupper()]
    if (
        len(words) >= 2
        and all(len(word) >= 3 for word in words)
        and all(part.isalnum() and len(part) <= 4 for part in parts if not part.isalpha())
    ):
        return True
    parts = re.split(r"[_-]", token)
    return len(parts) > 1 and all(
        part.isdigit() or (part.isalpha() and (part.islower() or part.isupper()))
        for part in parts
        if part
    )


def _is_card_number(digits: str) -> bool:
    if not any(
        prefix.match(digits) and len(digits) in lengths for prefix, lengths in _CARD_ISSUERS
    ):
        return False
    return _luhn_ok(digits)


def _luhn_ok(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        digit = int(char)
        if index % 2 == 1:
            digit *= 2
            if digit > 9:
                digit -= 9
        total += digit
    return total % 10 == 0


def _merge(hits: Sequence[_Hit]) -> list[tuple[int, int]]:
    # Several detectors often report the same secret (a JWT is also high-entropy and follows
    # "Bearer"): overlapping reports are one secret.
    merged: list[tuple[int, int]] = []
    for hit in sorted(hits, key=lambda h: (h.start, h.end)):
        if merged and hit.start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hit.end))
        else:
            merged.append((hit.start, hit.end))
    return merged


def _drop_segments(text: str, spans: Sequence[tuple[int, int]]) -> tuple[str, int]:
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
