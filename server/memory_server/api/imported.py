"""AppendMessages' messages, validated into the domain's NewMessage: each field checked and named
(`messages[3].content`), ids unique within the request.

A large import (up to max_messages_per_append messages of max_message_bytes each, 60 MiB and
more) is a Python pass over every message: it runs on a worker thread, so the event loop that
every other scope's calls wait on is never held for it (tests/test_no_stall.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from memory_client.v1 import memory_pb2 as pb
from memory_server.api import convert as c
from memory_server.api import validation as v
from memory_server.api.call import time_field
from memory_server.memory.conversation.model import NewMessage
from memory_server.memory.errors import InvalidArgument

__all__ = ["new_messages"]

# Up to this many messages, validating on the loop is cheaper than a thread hop (a message's
# check is a few microseconds per KB: 16 of the largest allowed take a few milliseconds).
_INLINE_MESSAGES = 16


async def new_messages(
    given: Sequence[pb.NewMessage], *, max_messages: int, max_message_bytes: int
) -> list[NewMessage]:
    if len(given) <= _INLINE_MESSAGES:
        return _validated(given, max_messages, max_message_bytes)
    return await asyncio.to_thread(_validated, given, max_messages, max_message_bytes)


def _validated(
    given: Sequence[pb.NewMessage], max_messages: int, max_message_bytes: int
) -> list[NewMessage]:
    v.items("messages", len(given), max_messages, "messages")
    messages = []
    seen: set[str] = set()
    for i, m in enumerate(given):
        field = f"messages[{i}]"
        role = c.role(f"{field}.role", m.role)
        message_id = v.identifier(f"{field}.message_id", m.message_id, required=False)
        if message_id and message_id in seen:
            raise InvalidArgument(f"{field}.message_id", "repeats an earlier message's id")
        seen.add(message_id)
        messages.append(
            NewMessage(
                role=role,
                content=v.content(f"{field}.content", m.content, max_message_bytes),
                tokens=0,  # counted by the domain
                context_tokens=0,
                message_id=message_id,
                model=v.short_text(f"{field}.model", m.model, v.MAX_ID_CHARS),
                parent_id=v.identifier(f"{field}.parent_id", m.parent_id, required=False),
                response_time_seconds=v.duration_seconds(
                    f"{field}.response_time_seconds", m.response_time_seconds
                ),
                feedback=c.feedback(f"{field}.feedback", m.feedback),
                comment=v.short_text(f"{field}.comment", m.comment, v.MAX_COMMENT_BYTES),
                created_at=time_field(f"{field}.created_at", m, "created_at"),
            )
        )
    return messages
