"""Memory in the shapes GraphRAG's agent takes (tigergraph/graphrag cc4eed1): history items
`{"query", "response"}` (graphrag/app/agent/agent.py:127-131, the last 4: routers/ui.py:276)
for the schema-mapping prompt (agent_graph.py:141), and the answer prompt's one `context`
string (agent_graph.py:362-375, agent_generation.py:34)."""

from __future__ import annotations

from memory_client.graphrag import (
    generation_context,
    history_from_messages,
    history_items,
    schema_mapping_conversation,
)
from memory_client.graphrag.prompts import GRAPH_EVIDENCE_HEADING, SUMMARY_QUERY
from memory_client.v1 import memory_pb2 as pb


def _context(*turns: tuple[str, str], summary: str = "", dangling: str = "") -> pb.MemoryContext:
    recent = []
    for i, (question, answer) in enumerate(turns):
        recent.append(pb.ContextMessage(message_id=f"q{i}", role=pb.ROLE_USER, content=question))
        recent.append(pb.ContextMessage(message_id=f"a{i}", role=pb.ROLE_ASSISTANT, content=answer))
    if dangling:
        recent.append(pb.ContextMessage(message_id="qx", role=pb.ROLE_USER, content=dangling))
    return pb.MemoryContext(
        summary=summary,
        recent_messages=recent,
        rendered="## Memory context (not graph evidence)\nUser prefers EUR.\n",
    )


def test_history_items_are_graphrags_query_response_pairs() -> None:
    turns = [(f"question {i}", f"answer {i}") for i in range(6)]
    context = _context(*turns, dangling="unanswered")
    assert history_items(context) == [
        {"query": f"question {i}", "response": f"answer {i}"} for i in range(2, 6)
    ]
    assert len(history_items(context, limit=None)) == 6
    # An assistant message first (its question fell out of the budget) gives no item.
    cut = pb.MemoryContext(recent_messages=list(_context(*turns).recent_messages)[1:])
    assert history_items(cut, limit=None)[0] == {"query": "question 1", "response": "answer 1"}


def test_history_from_chat_history_messages() -> None:
    # GET /ui/{graph}/conversation/{id} answers a list; the reply is role "system" with the
    # question as parent (chat-history's Message shape).
    messages = [
        {"message_id": "m1", "parent_id": None, "role": "user", "content": "Who owns A-1?"},
        {"message_id": "m2", "parent_id": "m1", "role": "system", "content": "Bob."},
        {"message_id": "m3", "parent_id": None, "role": "user", "content": "Since when?"},
    ]
    assert history_from_messages(messages) == [{"query": "Who owns A-1?", "response": "Bob."}]


def test_schema_mapping_conversation_puts_the_summary_first() -> None:
    context = _context(("Which accounts share D-77?", "5120 and 9983."), summary="Fraud review.")
    assert schema_mapping_conversation(context) == [
        {"query": SUMMARY_QUERY, "response": "Fraud review."},
        {"query": "Which accounts share D-77?", "response": "5120 and 9983."},
    ]
    assert schema_mapping_conversation(_context(("q", "a"))) == [{"query": "q", "response": "a"}]


def test_generation_context_keeps_memory_apart_from_graph_evidence() -> None:
    block = _context().rendered
    graph = '{"result": [{"account": "5120"}]}'
    combined = generation_context(graph, block)
    assert combined.startswith(GRAPH_EVIDENCE_HEADING + graph)
    assert combined.index(graph) < combined.index("## Memory context (not graph evidence)")
    assert generation_context(graph, "") == graph


def test_memory_service_address_from_graphrags_config() -> None:
    from memory_client.graphrag import memory_service_address

    config: dict[str, object] = {
        "db_config": {"hostname": "http://tigergraph"},
        "graphrag_config": {"chat_history_api": "http://chat-history:8002"},
    }
    assert memory_service_address(config) is None
    config["graphrag_config"] = {"memory_service_address": "graphrag-memory:50051"}
    assert memory_service_address(config) == "graphrag-memory:50051"
    assert memory_service_address({}) is None
