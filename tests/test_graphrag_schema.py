"""Hiding the memory index in the shapes GraphRAG's agent really reads (tigergraph/graphrag
cc4eed1): pyTigerGraph's getVertexTypes()/getEdgeTypes() name lists (agent_router.py:45-46,
map_question_to_schema.py:101-102, generate_gsql.py:60-61, generate_cypher.py:60-61,
validation_utils.py:29,52) and the per-type dicts MapQuestionToSchema builds from them
(map_question_to_schema.py:104-114)."""

from __future__ import annotations

from memory_client.graphrag import (
    hide_memory_edge_types,
    hide_memory_edges_info,
    hide_memory_schema,
    hide_memory_vertex_types,
    hide_memory_vertices_info,
    is_memory_edge,
    is_memory_query,
    is_memory_vertex,
)

# What getVertexTypes() / getEdgeTypes() return on a GraphRAG graph holding the memory index
# (plus a user edge type that, against advice, points at it).
VERTEX_TYPES = ["Document", "Entity", "MemoryEmbedding", "Community", "MemoryScope"]
EDGE_TYPES = [
    "HAS_CONTENT",
    "RELATIONSHIP",
    "reverse_RELATIONSHIP",
    "ABOUT_MEMORY",
    "MemoryLink",
    "MemoryOfScope",
]
_ENDS: dict[str, tuple[object, object]] = {
    "HAS_CONTENT": ("Document", "Content"),
    "RELATIONSHIP": ("Entity", "Entity"),
    "reverse_RELATIONSHIP": ("Entity", "Entity"),
    # pyTigerGraph answers a set for an edge type with several pairs.
    "ABOUT_MEMORY": ({"Entity", "MemoryEmbedding"}, "Document"),
    # The memory's own semantic links between its vertices, and its scope edges.
    "MemoryLink": ("MemoryEmbedding", "MemoryEmbedding"),
    "MemoryOfScope": ("MemoryScope", "MemoryEmbedding"),
}


def _endpoints(edge: str) -> tuple[object, object]:
    return _ENDS[edge]


def test_name_lists_lose_only_the_memory_types() -> None:
    assert hide_memory_vertex_types(VERTEX_TYPES) == ["Document", "Entity", "Community"]
    # MemoryLink and MemoryOfScope go by their names alone; ABOUT_MEMORY only when its ends
    # are known.
    assert hide_memory_edge_types(EDGE_TYPES) == EDGE_TYPES[:4]
    assert hide_memory_edge_types(EDGE_TYPES, _endpoints) == EDGE_TYPES[:3]
    assert VERTEX_TYPES[2] == "MemoryEmbedding"  # the input is not changed


def test_schema_mapping_infos_lose_the_memory_types() -> None:
    vertices_info = [
        {"vertex": "Entity", "attributes": ["id", "definition"]},
        {"vertex": "MemoryEmbedding", "attributes": ["id", "memory_vector"]},
        {"vertex": "MemoryScope", "attributes": ["scope_hash"]},
    ]
    edges_info = [
        {"edge": "RELATIONSHIP", "source": "Entity", "target": "Entity"},
        {"edge": "ABOUT_MEMORY", "source": {"Entity", "MemoryEmbedding"}, "target": "Document"},
        {"edge": "POINTS_AT", "source": "Entity", "target": "MemoryEmbedding"},
        {"edge": "MemoryLink", "source": "MemoryEmbedding", "target": "MemoryEmbedding"},
        {"edge": "MemoryOfScope", "source": "MemoryScope", "target": "MemoryEmbedding"},
        {"edge": "SCOPE_NOTE", "source": "MemoryScope", "target": "Entity"},
    ]
    assert hide_memory_vertices_info(vertices_info) == vertices_info[:1]
    assert hide_memory_edges_info(edges_info) == edges_info[:1]


def test_the_dict_form_and_the_predicates_still_work() -> None:
    schema = {
        "VertexTypes": [{"Name": "Entity"}, {"Name": "MemoryEmbedding"}, {"Name": "MemoryScope"}],
        "EdgeTypes": [
            {"Name": "RELATIONSHIP", "FromVertexTypeName": "Entity", "ToVertexTypeName": "Entity"},
            # A listing that omits the ends still loses the memory's edge type by its name.
            {"Name": "MemoryLink", "IsDirected": False},
            {"Name": "MemoryOfScope", "IsDirected": True},
        ],
    }
    shown = hide_memory_schema(schema)
    assert [v["Name"] for v in shown["VertexTypes"]] == ["Entity"]
    assert len(shown["EdgeTypes"]) == 1
    assert is_memory_vertex("MemoryEmbedding") and not is_memory_vertex("Entity")
    assert is_memory_vertex("MemoryScope")
    assert not is_memory_edge("RELATIONSHIP") and is_memory_edge("MemoryLink")
    assert is_memory_edge("MemoryOfScope")
    assert is_memory_query("GET /query/GraphRAG/Memory_scan_page")
    assert is_memory_query("GET /query/GraphRAG/Memory_search")
