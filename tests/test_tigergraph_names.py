"""No name the memory index puts in a user's graph equals one GraphRAG's own GSQL uses (issue 27):
not a vertex or edge type, an attribute, a vector attribute, a query, a schema change or loading
job, an index or a tuple type. GraphRAG's names below are taken from tigergraph/graphrag at
cc4eed1: common/gsql/supportai/SupportAI_Schema.gsql, SupportAI_Schema_Native_Vector.gsql,
SupportAI_IndexCreation.gsql, SupportAI_InitialLoad*.gsql, and the CREATE [OR REPLACE]
[DISTRIBUTED] QUERY and TYPEDEF TUPLE lines of every other .gsql file under common/ (its
tests/ data sets excluded); supportai.py and tigergraph_embedding_store.py create nothing else.
Ours are read from the stand-in's catalog after a real install, so a name added to the GSQL
without a thought is caught too."""

from __future__ import annotations

from memory_client.schema_names import (
    MEMORY_EDGES,
    MEMORY_JOBS,
    MEMORY_QUERIES,
    MEMORY_VECTOR_ATTRIBUTE,
    MEMORY_VERTICES,
)
from memory_server.index.tigergraph import install_schema

from tg_index import DIM, args
from tg_server import TGServer

GRAPHRAG_VERTEX_TYPES = {
    "DocumentChunk", "Document", "Concept", "Entity", "Relationship", "DocumentCollection",
    "Content", "EntityType", "Community", "ResolvedEntity",
}  # fmt: skip
_EDGES = [
    "HAS_CONTENT", "IS_CHILD_OF", "IS_HEAD_OF", "HAS_TAIL", "DESCRIBES_RELATIONSHIP",
    "DESCRIBES_ENTITY", "CONTAINS_ENTITY", "MENTIONS_RELATIONSHIP", "IS_AFTER", "HAS_CHILD",
    "HAS_RELATIONSHIP", "CONTAINS_DOCUMENT", "ENTITY_HAS_TYPE", "RELATIONSHIP_TYPE",
    "RELATIONSHIP", "RESOLVES_TO", "RESOLVED_RELATIONSHIP", "IN_COMMUNITY", "LINKS_TO",
    "HAS_PARENT",
]  # fmt: skip
# Each with its REVERSE_EDGE="reverse_<name>".
GRAPHRAG_EDGE_TYPES = set(_EDGES) | {f"reverse_{e}" for e in _EDGES}
GRAPHRAG_ATTRIBUTES = {
    "id", "idx", "epoch_added", "epoch_processing", "epoch_processed", "description",
    "concept_type", "human_curated", "definition", "entity_type", "short_name", "ctype", "text",
    "iteration", "relation_type", "frequency", "weight",
    # The vector attribute of DocumentChunk, Document, Concept, Entity, Relationship,
    # Community and ResolvedEntity (SupportAI_Schema_Native_Vector.gsql).
    "embedding",
}  # fmt: skip
GRAPHRAG_QUERIES = {
    "Build_Community_Concepts", "Build_Concept_Tree", "Build_Entity_Concepts",
    "Build_Relationship_Concepts", "getEntityRelationshipConceptCooccurrence",
    "ResolveRelationships", "SetEpochProcessing", "StreamDocContent", "StreamDocIds",
    "StreamIds", "communities_have_desc", "entities_have_resolution", "get_community_children",
    "get_vertices_or_remove", "graphrag_louvain_communities", "graphrag_louvain_init",
    "modularity", "stream_community", "Check_Nonexistent_Vertices", "ECC_Status",
    "Scan_For_Updates", "Selected_Set_Display", "Update_Vertices_Processing_Status",
    "create_entity_type_relationships", "Chunk_Sibling_Search", "Chunk_Sibling_Vector_Search",
    "Content_Similarity_Search", "Content_Similarity_Vector_Search",
    "Entity_Relationship_Retrieval", "GraphRAG_Community_Search",
    "GraphRAG_Community_Search_Display", "GraphRAG_Community_Vector_Search",
    "GraphRAG_Hybrid_Search", "GraphRAG_Hybrid_Search_Display", "GraphRAG_Hybrid_Vector_Search",
    "Keyword_Search", "check_embedding_exists", "get_topk_closest", "get_topk_similar",
    "get_vertices_with_vector", "vertices_have_embedding",
}  # fmt: skip
GRAPHRAG_JOBS = {"add_supportai_schema", "add_supportai_vector", "add_supportai_indexes"}
# Loading jobs are named with a uuid after these prefixes.
GRAPHRAG_JOB_PREFIXES = (
    "load_documents_content_json_",
    "load_documents_content_csv_",
    "load_documents_content_tt_",
)
GRAPHRAG_INDEXES = {
    "doc_epoch_added_index", "doc_epoch_processing_index",
    "doc_epoch_processing_indexepoch_processed_index", "doc_chunk_epoch_added_index",
    "doc_chunk_epoch_processing_index", "doc_chunk_epoch_processed_index",
    "concept_epoch_added_index", "concept_epoch_processing_index",
    "concept_epoch_processed_index",
}  # fmt: skip
GRAPHRAG_TUPLES = {"Move", "ProcessInfo", "TextInfo", "VertexTypes", "Similarity_Results"}

GRAPHRAG_NAMES = (
    GRAPHRAG_VERTEX_TYPES
    | GRAPHRAG_EDGE_TYPES
    | GRAPHRAG_ATTRIBUTES
    | GRAPHRAG_QUERIES
    | GRAPHRAG_JOBS
    | GRAPHRAG_INDEXES
    | GRAPHRAG_TUPLES
)


def _ours(tg: TGServer) -> set[str]:
    catalog = tg.state.catalog
    names = set(catalog.vertex_types) | set(catalog.edge_types)
    for vt in catalog.vertex_types.values():
        names |= {vt.primary_id[0], *(a for a, _ in vt.attributes), *vt.vectors}
    for et in catalog.edge_types.values():
        names |= {a for a, _ in et.attributes}
    return names | tg.state.installed_queries | set(MEMORY_JOBS)


async def test_no_name_of_ours_is_one_of_graphrags(tg: TGServer) -> None:
    await install_schema(args(tg), DIM)
    ours = _ours(tg)
    assert set(MEMORY_VERTICES) | set(MEMORY_EDGES) | set(MEMORY_QUERIES) <= ours
    assert MEMORY_VECTOR_ATTRIBUTE in ours
    folded = {n.lower() for n in GRAPHRAG_NAMES}
    assert sorted(n for n in ours if n.lower() in folded) == []
    assert [n for n in ours if n.startswith(GRAPHRAG_JOB_PREFIXES)] == []
    # Every type of ours says whose it is.
    assert all(n.startswith("Memory") for n in set(MEMORY_VERTICES) | set(MEMORY_EDGES))
