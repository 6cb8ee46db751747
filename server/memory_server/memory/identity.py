"""Scope identity. LTM scope = (username, graphname); STM scope adds conversation_id."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Scope:
    username: str
    graphname: str

    @property
    def scope_hash(self) -> str:
        return scope_hash(self.username, self.graphname)


def scope_hash(username: str, graphname: str) -> str:
    """Stable, collision-safe hash of the pair: each part is length-prefixed before hashing, so
    ("ab", "c") and ("a", "bc") never share an encoding."""
    digest = hashlib.sha256()
    for part in (graphname, username):
        data = part.encode("utf-8")
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)
    return digest.hexdigest()[:32]
