"""The secret rule for the RPC fields that are not messages.

A fact is something the user asked to remember, searchable and recalled into every prompt: a
fact text holding a secret (AddFact, AddFacts, UpdateFact) is refused with INVALID_ARGUMENT
naming the field and the secret's type, never its value, and nothing is written; storing
"[redacted: api key]" as a fact would remember nothing. This holds whatever `redact_secrets`
says. Conversation names and feedback comments are stored like messages (redacted, or verbatim
with `redact_secrets` off): that is Turns.redact, which the servicer calls."""

from __future__ import annotations

import re
from typing import Final

from memory_server.memory.errors import InvalidArgument
from memory_server.memory.ports import SecretFilter

__all__ = ["refuse_secret"]

_PLACEHOLDER: Final = re.compile(r"\[redacted: ([a-z ]+)\]")


def refuse_secret(secrets: SecretFilter, field: str, text: str) -> str:
    """`text` unchanged, or InvalidArgument (`text: holds a secret (api key)`) when it holds
    a secret."""
    redacted = secrets.redact(text)
    if not redacted.secrets_found:
        return text
    already = _PLACEHOLDER.findall(text)  # placeholders the client wrote itself are no secret
    kinds = _PLACEHOLDER.findall(redacted.text)
    for kind in already:
        if kind in kinds:
            kinds.remove(kind)
    named = ", ".join(dict.fromkeys(kinds)) or "secret"
    raise InvalidArgument(field, f"holds a secret ({named})")
