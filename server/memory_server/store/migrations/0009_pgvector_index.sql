-- Which index the pgvector table memory_vectors has: `exact` (scans within a scope) or `hnsw`.
-- A property of the database, not of each server, so replicas configured differently cannot
-- drop what another built (issue 29). One row: written by the first server to make the vectors
-- table (its pgvector_hnsw), or from an HNSW index found there after an upgrade; afterwards
-- only by `python -m memory_server.index.pgvector_kind exact|hnsw`, which builds or drops the
-- index itself (index/pgvector.py, index/pgvector_kind.py).
CREATE TABLE pgvector_index (
    one_row    boolean PRIMARY KEY DEFAULT true CHECK (one_row),
    kind       text NOT NULL CHECK (kind IN ('exact', 'hnsw')),
    changed_at timestamptz NOT NULL DEFAULT now(),
    changed_by text NOT NULL
);
