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
  separate, labelled parts, so the model never takes memory for evidence from the graph. The
  graph evidence is a string on GraphRAG's inquiryai branch but a dict (supportai) or the
  cypher answer (any JSON value) on the others: anything not a string goes in as JSON.
* `agent_history`: what to hand GraphRAG's `run_agent` as its history. It keeps only the last
  4 items it is given (ui.py:276), so this puts the summary item first and at most 3 turns after
  it: nothing of it is cut.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from memory_client.v1 import memory_pb2 as pb

__all__ = [
    "GRAPH_EVIDENCE_HEADING",
    "GRAPHRAG_HISTORY_TURNS",
    "MEMORY_NOTE",
    "SUMMARY_QUERY",
    "agent_history",
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
#: What the answer prompt is told about the memory part of its context. GraphRAG's answer
#: prompts (common/prompts/*/chatbot_response.txt) ask for every piece of the context to be
#: covered in the answer; this says that holds for the graph evidence, and how memory is used.
MEMORY_NOTE = (
    "How to use the memory below: it is what this user said earlier (in this and other "
    "conversations) and what we learned about them. Use it to understand the question (what "
    "'it', 'them' or 'that account' refer to), to keep to how the user asked to be answered, "
    "and to answer questions about what they told us. It is not evidence from the knowledge "
    "graph: do not cite it as a source, and the instruction to cover all of the context "
    "applies to the graph evidence above, not to this memory.\n"
)


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


def agent_history(
    context: pb.MemoryContext, *, limit: int = GRAPHRAG_HISTORY_TURNS
) -> list[dict[str, str]]:
    """History items for GraphRAG's `run_agent`, which keeps the last `limit` it is given: the
    summary item (when there is one) and the newest turns, `limit` items in all, so the cut
    drops nothing. The same items as `schema_mapping_conversation`, one turn fewer when there
    is a summary."""
    if limit <= 0:
        return []
    if not context.summary:
        return history_items(context, limit=limit)
    turns = history_items(context, limit=limit - 1) if limit > 1 else []
    return [{"query": SUMMARY_QUERY, "response": context.summary}, *turns]


def _evidence_text(graph_context: object) -> str:
    if isinstance(graph_context, str):
        return graph_context
    return json.dumps(graph_context, ensure_ascii=False, default=str)


def generation_context(graph_context: object, memory_block: str) -> str:
    """The `context` for GraphRAG's answer prompt: the graph evidence it retrieved (a string,
    or any JSON value: the supportai branch passes a dict), then `MEMORY_NOTE` and the memory
    block (`Turn.context_block`, which heads itself "Memory context (not graph evidence)").
    Without a memory block this is the graph evidence alone (a string unchanged, anything else
    as JSON)."""
    if not memory_block.strip():
        return _evidence_text(graph_context)
    evidence = _evidence_text(graph_context).rstrip()
    return f"{GRAPH_EVIDENCE_HEADING}{evidence}\n\n{MEMORY_NOTE}\n{memory_block.rstrip()}\n"
