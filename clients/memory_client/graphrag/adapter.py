"""What GraphRAG's backend got from the chat-history service, served by MemoryService.

`GraphRAGMemory` wraps one `AsyncMemoryClient` and speaks GraphRAG's vocabulary:

* the memory context block for the agent (`begin_turn`, `memory_context`) and the write of the
  reply (`complete_turn`) — one call each per turn, replacing the history lookup and the two
  `POST /conversation` writes;
* the UI's history in chat-history's JSON shapes (`list_conversations`, `conversation_messages`,
  `submit_feedback`, `delete_conversation`), so a UI written against chat-history keeps working.

Chat-history's shapes, kept here: a conversation is `{user_id, conversation_id, name,
create_ts, update_ts}` (plus `message_count`); a message is `{conversation_id, message_id,
parent_id, model, content, role, response_time, feedback, comment, create_ts}`, where `role` is
GraphRAG's: `"user"`, or `"system"` for the assistant's reply (GraphRAG has no "assistant"
role); a system message stored through `AppendMessages` also reads `"system"`. `parent_id` is
null when there is none, `feedback` is 0 none / 1 up / 2 down, times are RFC 3339 UTC (what
Go's JSON encoder wrote). Every call is scoped by username and graphname; chat-history had no
graph, so one user's history is now per graph.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp

from memory_client.client import AsyncMemoryClient
from memory_client.graphrag.prompts import (
    generation_context,
    history_items,
    schema_mapping_conversation,
)
from memory_client.v1 import memory_pb2 as pb

__all__ = [
    "FEEDBACK_VALUES",
    "MEMORY_SERVICE_KEY",
    "GraphRAGMemory",
    "Turn",
    "conversation_json",
    "memory_service_address",
    "message_json",
]

#: Where GraphRAG's server_config.json names the memory service: in `graphrag_config`, beside
#: `chat_history_api` (configs/server_config.json:11-15 at tigergraph/graphrag cc4eed1), which
#: GraphRAG's backend already reads (common/config.py:78). The memory server ignores that
#: section, so the key never reaches its settings.
MEMORY_SERVICE_KEY = "memory_service_address"


def memory_service_address(server_config: Mapping[str, Any]) -> str | None:
    """The memory service's gRPC address (host:port) from GraphRAG's server_config.json
    document, or None when memory is not configured (GraphRAG then runs without memory)."""
    section = server_config.get("graphrag_config")
    if not isinstance(section, Mapping):
        return None
    address = section.get(MEMORY_SERVICE_KEY)
    if address is None or address == "":
        return None
    if not isinstance(address, str):
        raise ValueError(f"graphrag_config.{MEMORY_SERVICE_KEY}: expected a host:port string")
    return address


# Chat-history's numbering, which the proto's Feedback enum shares.
FEEDBACK_VALUES: dict[int, pb.Feedback.ValueType] = {
    0: pb.FEEDBACK_NONE,
    1: pb.FEEDBACK_UP,
    2: pb.FEEDBACK_DOWN,
}
_ROLE_NAMES: dict[int, str] = {
    pb.ROLE_USER: "user",
    pb.ROLE_ASSISTANT: "system",
    pb.ROLE_SYSTEM: "system",
}


def _rfc3339(stamp: Timestamp) -> str | None:
    if not stamp.seconds and not stamp.nanos:
        return None
    return stamp.ToDatetime(tzinfo=UTC).isoformat().replace("+00:00", "Z")


def message_json(message: pb.Message) -> dict[str, Any]:
    """A stored message in chat-history's Message shape."""
    return {
        "conversation_id": message.conversation_id,
        "message_id": message.message_id,
        "parent_id": message.parent_id or None,
        "model": message.model,
        "content": message.content,
        "role": _ROLE_NAMES.get(message.role, "user"),
        "response_time": message.response_time_seconds,
        "feedback": int(message.feedback),
        "comment": message.comment,
        "create_ts": _rfc3339(message.created_at),
    }


def feedback_json(graphname: str, entry: pb.FeedbackEntry) -> dict[str, Any]:
    """A message of the admin export: chat-history's Message shape, with whose it is
    (`user_id`), the graph, and `update_ts` (when it was last rated; its creation otherwise)."""
    out = message_json(entry.message)
    out["user_id"] = entry.username
    out["graphname"] = graphname
    out["update_ts"] = _rfc3339(entry.feedback_at) or out["create_ts"]
    return out


def conversation_json(username: str, conversation: pb.Conversation) -> dict[str, Any]:
    """A conversation in chat-history's Conversation shape (plus its message count)."""
    return {
        "user_id": username,
        "conversation_id": conversation.conversation_id,
        "name": conversation.name,
        "create_ts": _rfc3339(conversation.created_at),
        "update_ts": _rfc3339(conversation.updated_at),
        "message_count": conversation.message_count,
    }


@dataclass(frozen=True)
class Turn:
    """A started turn: what the agent needs to answer, and the ids to complete it with."""

    username: str
    graphname: str
    conversation_id: str
    #: Id of the stored question; the reply's parent.
    message_id: str
    #: The memory block for the agent's prompt: summary, recent turns and the user's facts,
    #: headed as memory (not graph evidence). Never more than `stm_context_tokens` tokens.
    context_block: str
    context: pb.MemoryContext
    conversation_created: bool

    @property
    def history(self) -> list[dict[str, str]]:
        """The recent turns as GraphRAG's `{"query", "response"}` history items (the newest
        4, as GraphRAG cuts them): `TigerGraphAgent.question_for_agent(question, history)`."""
        return history_items(self.context)

    @property
    def schema_mapping_conversation(self) -> list[dict[str, str]]:
        """The `conversation` for GraphRAG's schema-mapping prompt (summary, then history)."""
        return schema_mapping_conversation(self.context)

    def generation_context(self, graph_context: str) -> str:
        """The `context` for GraphRAG's answer prompt: `graph_context` as graph evidence, then
        this turn's memory block, labelled as memory."""
        return generation_context(graph_context, self.context_block)


class GraphRAGMemory:
    """GraphRAG's memory calls over one `AsyncMemoryClient` (which it does not own: close the
    client yourself, or use `async with GraphRAGMemory.connect(...)`)."""

    def __init__(self, client: AsyncMemoryClient) -> None:
        self.client = client

    @classmethod
    def connect(cls, target: str, **client_options: Any) -> _OwnedMemory:
        """A GraphRAGMemory with a client of its own, closed on leaving `async with`."""
        return _OwnedMemory(AsyncMemoryClient(target, **client_options))

    # --- The agent's turn ------------------------------------------------------------------

    async def begin_turn(
        self,
        username: str,
        graphname: str,
        conversation_id: str,
        question: str,
        *,
        message_id: str = "",
        conversation_name: str = "",
    ) -> Turn:
        """Stores the question and returns the memory context for answering it (the question
        itself is not in the block). Give `message_id` (GraphRAG uses a uuid4) to make a retry
        safe."""
        started = await self.client.start_turn(
            username,
            graphname,
            conversation_id,
            question,
            message_id=message_id,
            conversation_name=conversation_name,
        )
        return Turn(
            username=username,
            graphname=graphname,
            conversation_id=conversation_id,
            message_id=started.message.message_id,
            context_block=started.context.rendered,
            context=started.context,
            conversation_created=started.conversation_created,
        )

    async def complete_turn(
        self,
        turn: Turn,
        answer: str,
        *,
        model: str = "",
        response_time_seconds: float = 0.0,
        message_id: str = "",
    ) -> dict[str, Any]:
        """Stores the agent's answer as the reply to `turn`; returns it as a chat-history
        message. Fact extraction and compaction follow on the server."""
        completed = await self.client.complete_turn(
            turn.username,
            turn.graphname,
            turn.conversation_id,
            answer,
            model=model,
            parent_id=turn.message_id,
            response_time_seconds=response_time_seconds,
            message_id=message_id,
        )
        return message_json(completed.message)

    async def memory_context(
        self, username: str, graphname: str, conversation_id: str, question: str
    ) -> str:
        """The memory block for `question` without storing anything (empty conversation: only
        the header and the user's facts)."""
        found = await self.client.get_context(
            username, graphname, conversation_id, question=question
        )
        return found.context.rendered

    # --- The UI's history --------------------------------------------------------------------

    async def list_conversations(self, username: str, graphname: str) -> list[dict[str, Any]]:
        """Every conversation of the user on the graph, most recently updated first."""
        out: list[dict[str, Any]] = []
        token = ""
        while True:
            page = await self.client.list_conversations(
                username, graphname, page_size=500, page_token=token
            )
            out.extend(conversation_json(username, c) for c in page.conversations)
            token = page.next_page_token
            if not token:
                return out

    async def conversation_messages(
        self, username: str, graphname: str, conversation_id: str
    ) -> list[dict[str, Any]]:
        """Every message of the conversation, oldest first. Raises `NotFoundError` when the
        user has no such conversation on the graph."""
        out: list[dict[str, Any]] = []
        token = ""
        while True:
            page = await self.client.get_conversation(
                username, graphname, conversation_id, page_size=1000, page_token=token
            )
            out.extend(message_json(m) for m in page.messages)
            token = page.next_page_token
            if not token:
                return out

    async def feedback_export(
        self, graphname: str, *, rated_only: bool = False
    ) -> list[dict[str, Any]]:
        """Every user's messages on the graph, oldest first (`feedback_json` shape): what
        chat-history's GET /get_feedback gave an admin. The caller checks who is an admin."""
        out: list[dict[str, Any]] = []
        token = ""
        while True:
            page = await self.client.list_feedback(
                graphname, rated_only=rated_only, page_size=1000, page_token=token
            )
            out.extend(feedback_json(graphname, entry) for entry in page.entries)
            token = page.next_page_token
            if not token:
                return out

    async def submit_feedback(
        self,
        username: str,
        graphname: str,
        message_id: str,
        feedback: int,
        comment: str = "",
    ) -> dict[str, Any]:
        """Sets a message's feedback (0 none, 1 up, 2 down) and comment; returns the message."""
        if feedback not in FEEDBACK_VALUES:
            raise ValueError("feedback must be 0 (none), 1 (up) or 2 (down)")
        updated = await self.client.submit_feedback(
            username, graphname, message_id, FEEDBACK_VALUES[feedback], comment=comment
        )
        return message_json(updated.message)

    async def delete_conversation(self, username: str, graphname: str, conversation_id: str) -> int:
        """Deletes the conversation with its messages; returns how many messages went."""
        deleted = await self.client.delete_conversation(username, graphname, conversation_id)
        return int(deleted.deleted_messages)


class _OwnedMemory(GraphRAGMemory):
    async def __aenter__(self) -> GraphRAGMemory:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.client.close()
