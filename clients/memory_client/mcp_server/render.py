"""The service's answers as the MCP tools hand them back: plain JSON objects whose names say
what they hold, times in ISO 8601 (UTC) or null, every memory with its id, its version, when it
was true (valid time), when it was recorded (transaction time) and where it came from."""

from __future__ import annotations

from datetime import UTC
from typing import Any

from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from memory_client.v1 import memory_pb2 as pb

__all__ = [
    "episode",
    "event",
    "fact",
    "link",
    "recalled_episode",
    "recalled_fact",
    "scored_fact",
    "when",
]

_ROLES = {pb.ROLE_USER: "user", pb.ROLE_ASSISTANT: "assistant", pb.ROLE_SYSTEM: "system"}


def when(message: Message, field: str) -> str | None:
    """A Timestamp field as `2026-12-05T10:00:00Z`, or None when unset."""
    if not message.HasField(field):
        return None
    stamp: Timestamp = getattr(message, field)
    return stamp.ToDatetime(tzinfo=UTC).isoformat().replace("+00:00", "Z")


def _provenance(m: pb.Fact | pb.FactEvent) -> dict[str, str | None]:
    """Where a fact (or one of its changes) came from: the conversation and message it was
    learned from (none for a fact stated through a tool) and what extracted it."""
    return {
        "conversation_id": m.conversation_id or None,
        "message_id": m.message_id or None,
        "extractor": m.extractor or None,
    }


def fact(f: pb.Fact) -> dict[str, Any]:
    return {
        "fact_id": f.fact_id,
        "version_id": f.version_id,
        "text": f.text,
        "kind": f.kind,
        "valid_from": when(f, "valid_from"),
        "valid_to": when(f, "valid_to"),
        "recorded_at": when(f, "recorded_at"),
        "superseded_at": when(f, "superseded_at"),
        "event_time": when(f, "event_time"),
        "event_period": f.event_period or None,
        "provenance": _provenance(f),
    }


def scored_fact(s: pb.ScoredFact) -> dict[str, Any]:
    return {
        **fact(s.fact),
        "score": round(s.score, 4),
        "vector_score": round(s.vector_score, 4),
        "lexical_score": round(s.lexical_score, 4),
    }


def episode(message: pb.Message, score: float) -> dict[str, Any]:
    """A message said in one of the user's conversations, recalled for the question."""
    return {
        "message_id": message.message_id,
        "conversation_id": message.conversation_id,
        "role": _ROLES.get(message.role, "unspecified"),
        "text": message.content,
        "said_at": when(message, "created_at"),
        "score": round(score, 4),
    }


def recalled_fact(f: pb.RecalledFact) -> dict[str, Any]:
    """A fact as a context shows it (standing: an instruction recalled into every turn)."""
    return {
        "fact_id": f.fact_id,
        "text": f.text,
        "score": round(f.score, 4),
        "standing": f.standing,
        "valid_from": when(f, "valid_from"),
    }


def recalled_episode(e: pb.RecalledEpisode) -> dict[str, Any]:
    """A message of an earlier conversation, as a context shows it."""
    return {
        "message_id": e.message_id,
        "conversation_id": e.conversation_id,
        "text": e.content,
        "said_at": when(e, "created_at"),
        "score": round(e.score, 4),
    }


def event(e: pb.FactEvent) -> dict[str, Any]:
    return {
        "event": e.event,
        "at": when(e, "at"),
        "version_id": e.version_id,
        "detail": e.detail or None,
        "provenance": _provenance(e),
    }


def link(k: pb.FactLink) -> dict[str, Any]:
    return {
        "fact_id": k.fact_id,
        "version_id": k.version_id,
        "score": round(k.score, 4),
        "recorded_at": when(k, "recorded_at"),
    }
