"""GraphRAG drop-in: what GraphRAG's chat-history service gave the backend, over MemoryService.

* `GraphRAGMemory`: the agent's memory block per turn and the UI's history in chat-history's
  JSON shapes (`memory_client.graphrag.adapter`).
* `history_items`, `history_from_messages`, `schema_mapping_conversation`,
  `generation_context` (also on `Turn`): memory in the shapes GraphRAG's agent takes — its
  `{"query", "response"}` history, the schema-mapping prompt's conversation, and the answer
  prompt's context with memory labelled apart from graph evidence
  (`memory_client.graphrag.prompts`).
* `memory_service_address`: the service's address from GraphRAG's server_config.json
  (`graphrag_config.memory_service_address`).
* `memory_ui_router`: the graph-scoped UI routes as a FastAPI router
  (`memory_client.graphrag.router`; needs the `graphrag` extra, so it is not imported here).
* `hide_memory_vertex_types`, `hide_memory_edge_types` (pyTigerGraph's `getVertexTypes()` /
  `getEdgeTypes()` name lists, which GraphRAG's agent reads), `hide_memory_vertices_info`,
  `hide_memory_edges_info`, `hide_memory_schema` (a `getSchema()` dict), `hide_memory_queries`:
  remove the memory index from what the agent sees; `is_memory_vertex`, `is_memory_edge`,
  `is_memory_query` test one name.
* `global_roles`, `conversation_access_roles`, `has_admin_role`: GraphRAG's admin rule for the
  all-users feedback export (`memory_client.graphrag.roles`).
* `python -m memory_client.graphrag.migrate`: imports chat-history's SQLite file.
* `memory_client.graphrag.integration`: what GraphRAG's own code calls once
  `graphrag-memory-integrate` (`memory_client.graphrag.integration.apply`) has made its edits: the
  client's lifespan and the UI routes (`memory.install`), the turn around the agent (`memory.begin`,
  `memory.complete`), memory in the answer prompt (`answer_context`), and the agent's connection
  without the memory index (`hide_memory`).
"""

from memory_client.graphrag.adapter import (
    GraphRAGMemory,
    Turn,
    conversation_json,
    feedback_json,
    memory_service_address,
    message_json,
)
from memory_client.graphrag.prompts import (
    agent_history,
    generation_context,
    history_from_messages,
    history_items,
    schema_mapping_conversation,
)
from memory_client.graphrag.roles import (
    conversation_access_roles,
    global_roles,
    has_admin_role,
)
from memory_client.graphrag.schema_view import hide_memory
from memory_client.schema_names import (
    hide_memory_edge_types,
    hide_memory_edges_info,
    hide_memory_queries,
    hide_memory_schema,
    hide_memory_vertex_types,
    hide_memory_vertices_info,
    is_memory_edge,
    is_memory_query,
    is_memory_vertex,
)

__all__ = [
    "GraphRAGMemory",
    "Turn",
    "agent_history",
    "conversation_access_roles",
    "conversation_json",
    "feedback_json",
    "generation_context",
    "global_roles",
    "has_admin_role",
    "hide_memory",
    "hide_memory_edge_types",
    "hide_memory_edges_info",
    "hide_memory_queries",
    "hide_memory_schema",
    "hide_memory_vertex_types",
    "hide_memory_vertices_info",
    "history_from_messages",
    "history_items",
    "is_memory_edge",
    "is_memory_query",
    "is_memory_vertex",
    "memory_service_address",
    "message_json",
    "schema_mapping_conversation",
]
