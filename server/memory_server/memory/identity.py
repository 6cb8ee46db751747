"""Scope identity. LTM scope = (username, graphname); STM scope adds conversation_id."""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Scope:
    username: str
    graphname: str

    @property
    def scope_hash(self) -> str:
        return scope_hash(self.username, self.graphname)

    @property
    def episode_partition(self) -> str:
        return episode_partition(self.scope_hash)


def scope_hash(username: str, graphname: str) -> str:
    """Stable, collision-safe hash of the pair: each part is length-prefixed before hashing, so
    ("ab", "c") and ("a", "bc") never share an encoding."""
    digest = hashlib.sha256()
    for part in (graphname, username):
        data = part.encode("utf-8")
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)
    return digest.hexdigest()[:32]


EPISODE_PARTITION_SUFFIX = "/episodes"
# An episode's vector is made from at most this many first characters of its message (its
# words all count for the lexical signal): the offline model reads at most 256 word pieces
# and costs about 47 ms a text at that length on 2 cores (bench/README.md, "Episodes"), and a
# 60 KiB pasted document would otherwise be read, held and tokenized whole for nothing.
EPISODE_EMBED_CHARS = 1000


def episode_partition(scope_hash: str) -> str:
    """The vector index's partition key of a scope's episodes (its messages, migration 0010):
    apart from its facts, so a fact search or a link never meets an episode."""
    return scope_hash + EPISODE_PARTITION_SUFFIX


def episode_vector_id(seq: int) -> str:
    """An episode's id in the vector index and the outbox: its message's seq as a uuid (as the
    database's memory_episode_id writes it)."""
    return str(uuid.UUID(int=seq))


def episode_seq(vector_id: str) -> int:
    """The message seq of an episode's vector id (episode_vector_id's inverse)."""
    return uuid.UUID(vector_id).int
