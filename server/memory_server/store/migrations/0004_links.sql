-- Semantic links between fact versions of one scope (written by the outbox actor after it
-- indexes a version: memory_server.outbox.links), followed one hop by recall.
--
-- Bitemporal like the versions: a link is believed at transaction time T when
-- recorded_at <= T < superseded_at (NULL = open). A link is implied by its two versions, so it
-- is believed from when both were (recorded_at = the later of their recorded_at) and until
-- either stops being believed (closed, never deleted, when an end is superseded or deleted);
-- linked_at says when the outbox actually computed it. Erasure (ForgetScope, the purge of
-- expired facts) removes the versions, and their links with them (ON DELETE CASCADE).
-- Links are undirected: a pair is stored once, whichever end was indexed later.
CREATE TABLE fact_links (
    id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    scope_id           bigint NOT NULL REFERENCES scopes (id) ON DELETE CASCADE,
    source_version_id  uuid NOT NULL REFERENCES fact_versions (id) ON DELETE CASCADE,
    target_version_id  uuid NOT NULL REFERENCES fact_versions (id) ON DELETE CASCADE,
    -- Cosine similarity of the two versions' vectors.
    score              real NOT NULL,
    recorded_at        timestamptz NOT NULL,
    superseded_at      timestamptz,
    linked_at          timestamptz NOT NULL DEFAULT now(),
    CHECK (source_version_id <> target_version_id),
    CHECK (superseded_at IS NULL OR recorded_at <= superseded_at)
);
CREATE UNIQUE INDEX fact_links_pair ON fact_links (
    LEAST(source_version_id, target_version_id), GREATEST(source_version_id, target_version_id));
CREATE INDEX fact_links_by_source ON fact_links (source_version_id);
CREATE INDEX fact_links_by_target ON fact_links (target_version_id);
