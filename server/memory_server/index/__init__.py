"""VectorIndex backends: the embedded one in PostgreSQL (pgvector); TigerGraph comes later."""
