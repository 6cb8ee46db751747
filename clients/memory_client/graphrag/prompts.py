"""Memory shaped for the places GraphRAG's agent can use it (tigergraph/graphrag cc4eed1).

GraphRAG's agent takes its history as a list of `{"query": …, "response": …}` items
(graphrag/app/agent/agent.py:127-131, the last 4 of them: graphrag/app/routers/ui.py:276) and
shows that list only to the schema-mapping prompt (agent_graph.py:141,
map_question_to_schema.py:127); the answer prompt gets the question and one `context` string
(agent_graph.py:362-375, agent_generation.py:34-67). So memory reaches GraphRAG three ways:

* `history_items`: the recent exact turns as GraphRAG's history items (from a turn's
  `MemoryContext`), and `history_from_messages` the same from chat-history-shaped messages;
* `schema_mapping_conversation`: what to pass as the schema-mapping prompt's `conversation`
  (the rolling summary first when there is one, then the newest items);
* `generation_context`: the answer prompt's `context`, graph evidence and memory context in
  separate, labelled parts, so the model never takes memory for evidence from the graph.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from memory_client.v1 import memory_pb2 as pb

__all__ = [
    "GRAPH_EVIDENCE_HEADING",
    "GRAPHRAG_HISTORY_TURNS",
    "SUMMARY_QUERY",
    "generation_context",
    "history_from_messages",
    "history_items",
    "schema_mapping_conversation",
]

#: How many history items GraphRAG hands its agent (ui.py:276 cuts to the last 4).
GRAPHRAG_HISTORY_TURNS = 4
#: The `query` of the item that carries the rolling summary in `schema_mapping_conversation`.
SUMMARY_QUERY = "(summary of the earlier conversation)"
GRAPH_EVIDENCE_HEADING = "## Graph evidence (from the knowledge graph)\n"


def _pairs(messages: Iterable[tuple[str, str, str, str]]) -> list[dict[str, str]]:
    """(message_id, parent_id, role, content) in order → query/response items: each user
    message with the first reply after it. A question still unanswered gives no item."""
    items: list[dict[str, str]] = []
    pending: tuple[str, str] | None = None  # (message_id, content) of the open question
    for message_id, parent_id, role, content in messages:
        if role == "user":
            pending = (message_id, content)
        elif role == "assistant" and pending is not None and parent_id in ("", pending[0]):
            items.append({"query": pending[1], "response": content})
            pending = None
    return items


def history_items(
    context: pb.MemoryContext, *, limit: int | None = GRAPHRAG_HISTORY_TURNS
) -> list[dict[str, str]]:
    """The context's recent exact turns as GraphRAG's history items, oldest first, at most
    `limit` of them (None: all). The current question is never among them: a turn's context is
    built before its answer exists."""
    items = _pairs(
        (m.message_id, "", _ROLES.get(m.role, "system"), m.content) for m in context.recent_messages
    )
    return items if limit is None else items[-limit:] if limit > 0 else []


_ROLES = {pb.ROLE_USER: "user", pb.ROLE_ASSISTANT: "assistant"}


def history_from_messages(
    messages: Sequence[Mapping[str, Any]], *, limit: int | None = GRAPHRAG_HISTORY_TURNS
) -> list[dict[str, str]]:
    """GraphRAG's history items from chat-history-shaped messages (what
    `GraphRAGMemory.conversation_messages` and `GET /ui/{graph}/conversation/{id}` return:
    a list, where the reply's role is "system" and its `parent_id` is the question's id)."""
    rows = []
    for m in messages:
        role = "user" if m.get("role") == "user" else "assistant"
        rows.append(
            (
                str(m.get("message_id") or ""),
                str(m.get("parent_id") or ""),
                role,
                str(m.get("content") or ""),
            )
        )
    items = _pairs(rows)
    return items if limit is None else items[-limit:] if limit > 0 else []


def schema_mapping_conversation(
    context: pb.MemoryContext, *, limit: int = GRAPHRAG_HISTORY_TURNS
) -> list[dict[str, str]]:
    """The `conversation` for GraphRAG's schema-mapping prompt: an item carrying the rolling
    summary (query `SUMMARY_QUERY`) when the conversation has one, then the newest `limit`
    exact turns. Long-term facts are left out: they say nothing about the graph's schema."""
    items = []
    if context.summary:
        items.append({"query": SUMMARY_QUERY, "response": context.summary})
    items.extend(history_items(context, limit=limit))
    return items


def generation_context(graph_context: str, memory_block: str) -> str:
    """The `context` for GraphRAG's answer prompt: the graph evidence it retrieved, then the
    memory block (`Turn.context_block`, which heads itself "Memory context (not graph
    evidence)"). Without a memory block this is the graph evidence unchanged."""
    if not memory_block.strip():
        return graph_context
    return f"{GRAPH_EVIDENCE_HEADING}{graph_context.rstrip()}\n\n{memory_block.rstrip()}\n"
