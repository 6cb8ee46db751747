"""What a secret looks like to DetectSecretsFilter: the detect-secrets detectors it runs, the key
shapes detect-secrets misses, password phrases, key words, card numbers and PEM blocks, and the
checks that tell a value from prose, a placeholder, a path or an identifier."""

from __future__ import annotations

import logging
import re
from re import Match, Pattern
from typing import Final

from detect_secrets.filters.heuristic import is_templated_secret
from detect_secrets.plugins.artifactory import ArtifactoryDetector
from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.basic_auth import BasicAuthDetector
from detect_secrets.plugins.cloudant import CloudantDetector
from detect_secrets.plugins.discord import DiscordBotTokenDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.ibm_cloud_iam import IbmCloudIamDetector
from detect_secrets.plugins.ibm_cos_hmac import IbmCosHmacDetector
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.softlayer import SoftlayerDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
from detect_secrets.plugins.twilio import TwilioKeyDetector

# Importing detect-secrets runs `logging.captureWarnings(True)` (detect_secrets.core.log), which
# would reroute every warning of the process to the "py.warnings" logger; nothing here relies on it.
logging.captureWarnings(False)

# detect-secrets' defaults (the values its CLI and baselines use).
BASE64_ENTROPY_LIMIT: Final = 4.5
HEX_ENTROPY_LIMIT: Final = 3.0

# Left out on purpose: IPPublicDetector (an IP address is not a credential); PrivateKeyDetector
# (it marks only the BEGIN line; `_pem_hits` takes the whole block); and OpenAIDetector,
# JwtTokenDetector and NpmDetector, whose regexes backtrack quadratically on long runs such as
# "sk-sk-sk-..." or "////..." (100+ ms for 8 KB): `PROVIDER_PATTERNS` has linear equivalents.
REGEX_DETECTORS: Final[tuple[type[RegexBasedDetector], ...]] = (
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
PROVIDER_PATTERNS: Final[tuple[tuple[str, str], ...]] = (
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
    # Validated by `is_jwt` with detect-secrets' JwtTokenDetector.is_formally_valid.
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
PW_ASSIGN: Final = re.compile(
    rf"(?i)(?<![A-Za-z0-9])(?:[A-Za-z0-9_.-]{{0,40}}?(?P<kw>{_PW})(?P<suffix>[A-Za-z0-9_.-]{{0,40}})"
    rf"|(?:[A-Za-z0-9]{{1,20}}[_.-])?(?:{_PW_SHORT})(?![A-Za-z0-9]))"
    rf"[\"'\]]*\s*(?::=|=>|==|->|[:=])\s*{_VALUE}"
)
_OWNER = (
    r"my|our|his|her|their|the\s+new|new|root|admin|wifi|wi-fi|db|database|account|login|"
    r"vault|master|sudo|temporary|temp|default|current|old"
)
PW_IS: Final = re.compile(
    rf"(?i)(?<![A-Za-z0-9])(?:(?P<owner>{_OWNER})\s+(?:[\w@.-]+\s+)?)?(?:{_PW}|pass|pw)"
    r"(?:\s+(?:for|to|of|on|at|in)\s+(?:[\w@.:/-]+\s+){0,2}[\w@.:/-]+){0,2}"
    r"\s+(?:is|was|will\s+be|is\s+now|is\s+set\s+to|has\s+been\s+(?:changed|set|reset)\s+to|"
    r"(?:changed|set|reset|updated)\s+to)\s*:?\s*"
    rf"{_VALUE}"
)
PW_BARE: Final = re.compile(rf"(?i)(?<![A-Za-z0-9])(?:{_PW})\s+{_VALUE}")
# "I changed my wifi password to Summer2024".
PW_CHANGED: Final = re.compile(
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
_PROSE_WORD: Final = re.compile(r"[a-z]+(?:ed|ing|ly|ful|less|able|ible)")
_REFERENCE: Final = re.compile(r"^[A-Za-z_][A-Za-z_]*(?:\.[A-Za-z_][A-Za-z_]*)+$")

# Generic keys: a high-entropy token shortly after one of these words.
# The leading lookahead on the first letters keeps this several times faster than the bare
# alternation (bench/README.md, "Figures behind the code").
KEY_CONTEXT: Final = re.compile(
    r"(?i)(?=[kstcabp])(?:keys?(?![a-z])|secret|token|credential|creds|auth(?!or)|bearer|passw|"
    r"pwd|signature|(?<![a-z])sig(?![a-z]))"
)
# Every regex of detect-secrets' KeywordDetector needs one of these words and a quote; most lines
# have neither, and those regexes are the slowest part of a scan.
KEYWORD_PREFILTER: Final = re.compile(r"(?i)(?=[kpsc])(?:key|pass|pwd|secret|contrase)")
KEY_CONTEXT_REACH: Final = 48  # characters between the keyword's end and the token
HASH_CONTEXT: Final = re.compile(
    r"(?i)\b(?:commit|sha\d*|hash|digest|checksum|revision|rev|md5|etag|git)\b"
)
# '=' only as base64 padding, so that "token=abc..." yields the value, not the assignment.
CANDIDATE_TOKEN: Final = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{16,}={0,2}")
_CAMEL_PARTS: Final = re.compile(r"[A-Z][a-z]*|[a-z]+|\d+|[^A-Za-z\d]+")
# The base64 body of an SSH *public* key ("ssh-ed25519 AAAAC3Nza..."): not a secret.
SSH_PUBLIC_KEY: Final = re.compile(r"(?:ssh-[a-z0-9]+|ecdsa-[a-z0-9-]+|sk-ssh-[a-z0-9@.-]+)\s+$")
HEX: Final = re.compile(r"[0-9a-fA-F]+")
ID_PREFIX: Final = re.compile(r"^[a-z]{2,12}_")
# A path component: lower-case or camelCase words (one capital per word), or a short code. Each
# repetition starts with a separator or a capital, so a failing match cannot backtrack
# exponentially.
_PATH_PART: Final = re.compile(
    r"[A-Z]?[a-z0-9]+(?:(?:[._-][A-Z]?|[A-Z])[a-z0-9]+)*|[A-Z0-9_.-]{1,8}"
)

# Card numbers: grouped 4-4-4-4(-3), Amex 4-6-5, Diners 4-6-4, or 13-19 contiguous digits.
CARD: Final = re.compile(
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
PEM_BEGIN: Final = re.compile(r"BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY")
PEM_END: Final = re.compile(r"-----END [A-Z0-9 ]*-----|Private-MAC:[^\n]*")


def is_jwt(token: str) -> bool:
    """A JWT by its form: a header and payload that decode (detect-secrets' check)."""
    parts = token.strip(".").split(".")
    return len(parts) >= 2 and JwtTokenDetector.is_formally_valid(".".join(parts[:2]))


def plausible_password(found: Match[str], *, strong: bool) -> bool:
    """Whether a password phrase's value (group `qval` or `val`) is a password; `strong`: the
    phrase itself says so ("my password is ..."), so a plain word is enough."""
    quoted = found.group("qval") is not None
    value = found.group("qval") if quoted else found.group("val")
    value = value.strip() if quoted else value.rstrip(".,;:?)")
    if len(value) < 4 or is_placeholder(value):
        return False
    if quoted:
        return True
    if value.lower() in _NOT_A_PASSWORD or "://" in value or value.startswith(("/", "~")):
        return False
    if looks_like_password(value):
        return True
    # "my password is swordfish" is one; "my old password was compromised" says what happened.
    return strong and not _PROSE_WORD.fullmatch(value)


def looks_like_password(value: str) -> bool:
    """Whether `value` has the shape of a password rather than of a word."""
    # A digit, a symbol other than word separators, or mixed case beyond a capital first letter
    # (so "Secret" and "STRING" do not count, "hUnter" does).
    return len(value) >= 4 and (
        any(c.isdigit() for c in value)
        or any(not c.isalnum() and c not in "-_. " for c in value)
        or (any(c.isupper() for c in value[1:]) and any(c.islower() for c in value))
    )


def is_placeholder(value: str) -> bool:
    """A template, a mask, an example or a reference to where the secret is kept."""
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


def looks_like_path(token: str) -> bool:
    """A path of words ("docs/api/v2/reference"), not base64 that happens to hold a slash."""
    if "/" not in token:
        return False
    parts = [part for part in token.split("/") if part]
    return all(_PATH_PART.fullmatch(part) for part in parts)


def looks_like_identifier(token: str) -> bool:
    """A name in code rather than a random token."""
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


def is_card_number(digits: str) -> bool:
    """A known issuer's prefix and length, and a valid Luhn check digit."""
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
