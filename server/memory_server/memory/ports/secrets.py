"""The secret filter every text passes before it is stored, extracted, embedded or logged."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Scrubbed:
    text: str  # the input without the sentences that held a secret
    secrets_found: int


class SecretFilter(Protocol):
    """Removes secrets (API keys, tokens, passwords, private keys, JWTs, cloud credentials, card
    numbers) before anything is extracted, stored, embedded or logged."""

    def scrub(self, text: str) -> Scrubbed: ...

    def redact(self, text: str) -> Scrubbed:
        """The text with each secret replaced by a typed placeholder (`[redacted: api key]`),
        the rest unchanged: what a stored message keeps."""
        ...
