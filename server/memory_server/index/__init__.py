"""VectorIndex backends: the embedded one in PostgreSQL (pgvector.py) and TigerGraph
(tigergraph/)."""
