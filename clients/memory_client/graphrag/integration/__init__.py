"""GraphRAG's own code, with memory in it (tigergraph/graphrag cc4eed1).

* `memory` (a `GraphRAGIntegration`), `answer_context`, `hide_memory`: what the edited GraphRAG
  modules call (`_turns` says what each call does);
* `edits`: the edits themselves, as data; `apply`: `graphrag-memory-integrate`, which makes
  them in a checkout (whole or not at all, idempotent, revertible);
* `admin`: chat-history's rule for who may export every user's feedback (`SHOW USER` roles);
* `followup`: follow-up questions made standalone for retrieval with GraphRAG's own LLM
  (optional: one more line in GraphRAG, one LLM call per turn with history).
"""

from memory_client.graphrag.integration._turns import (
    AgentTurn,
    GraphRAGIntegration,
    answer_context,
    hide_memory,
    memory,
    username_from_basic_auth,
)

__all__ = [
    "AgentTurn",
    "GraphRAGIntegration",
    "answer_context",
    "hide_memory",
    "memory",
    "username_from_basic_auth",
]
