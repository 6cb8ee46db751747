-- Long-term memory: bitemporal facts, their history, the vector outbox, the embedding model.
-- Vectors themselves live in the vector index (memory_server.index), not here.

CREATE TABLE facts (
    id              uuid PRIMARY KEY,
    scope_id        bigint NOT NULL REFERENCES scopes (id) ON DELETE CASCADE,
    kind            text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    -- Last time the fact was stated again or recalled into a turn (retention).
    last_seen_at    timestamptz NOT NULL DEFAULT now(),
    recall_count    bigint NOT NULL DEFAULT 0
);
CREATE INDEX facts_by_scope ON facts (scope_id);

-- Immutable once written, except for closing the transaction interval (superseded_at).
-- Believed at (valid time V, transaction time T):
--   recorded_at <= T < superseded_at (NULL = open) and valid_from <= V < valid_to (NULL = open).
CREATE TABLE fact_versions (
    id               uuid PRIMARY KEY,
    fact_id          uuid NOT NULL REFERENCES facts (id) ON DELETE CASCADE,
    scope_id         bigint NOT NULL REFERENCES scopes (id) ON DELETE CASCADE,
    text             text NOT NULL,
    kind             text NOT NULL,
    valid_from       timestamptz NOT NULL,
    valid_to         timestamptz,
    recorded_at      timestamptz NOT NULL,
    superseded_at    timestamptz,
    conversation_id  text NOT NULL DEFAULT '',
    message_id       text NOT NULL DEFAULT '',
    extractor        text NOT NULL DEFAULT '',
    -- A standing instruction about how to answer: recalled into every turn.
    standing         boolean NOT NULL DEFAULT false,
    lexemes          tsvector GENERATED ALWAYS AS (to_tsvector('english', text)) STORED,
    CHECK (valid_to IS NULL OR valid_from <= valid_to),
    CHECK (superseded_at IS NULL OR recorded_at <= superseded_at)
);
-- Live = current in both times; at most one live version per fact.
CREATE UNIQUE INDEX fact_versions_live ON fact_versions (fact_id)
    WHERE superseded_at IS NULL AND valid_to IS NULL;
CREATE INDEX fact_versions_live_by_scope ON fact_versions (scope_id)
    WHERE superseded_at IS NULL AND valid_to IS NULL;
CREATE INDEX fact_versions_standing ON fact_versions (scope_id)
    WHERE standing AND superseded_at IS NULL AND valid_to IS NULL;
CREATE INDEX fact_versions_by_fact ON fact_versions (fact_id, recorded_at);
CREATE INDEX fact_versions_by_scope ON fact_versions (scope_id, recorded_at);
CREATE INDEX fact_versions_lexemes ON fact_versions USING gin (lexemes);

-- Every change with its provenance. Kept on DeleteFact; removed only by ForgetScope.
CREATE TABLE fact_history (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    scope_id         bigint NOT NULL REFERENCES scopes (id) ON DELETE CASCADE,
    fact_id          uuid NOT NULL,
    version_id       uuid,
    event            text NOT NULL,
    at               timestamptz NOT NULL,
    conversation_id  text NOT NULL DEFAULT '',
    message_id       text NOT NULL DEFAULT '',
    extractor        text NOT NULL DEFAULT '',
    detail           text NOT NULL DEFAULT ''
);
CREATE INDEX fact_history_by_fact ON fact_history (fact_id, id);

-- Transactional outbox: written in the same transaction as the fact change it mirrors. The
-- outbox actor claims rows with FOR UPDATE SKIP LOCKED, so several servers can share it.
CREATE TABLE vector_outbox (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    scope_hash       text NOT NULL,
    op               text NOT NULL CHECK (op IN ('upsert', 'delete', 'purge')),
    -- The version to upsert or delete; NULL for a purge of the whole scope.
    version_id       uuid,
    attempts         integer NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    last_error       text NOT NULL DEFAULT '',
    created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX vector_outbox_due ON vector_outbox (next_attempt_at, id);

-- The embedding model the stored vectors were made with; a different one at start is an error
-- until the vectors are re-embedded.
CREATE TABLE embedding_model (
    singleton    boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    model_name   text NOT NULL,
    dimension    integer NOT NULL CHECK (dimension > 0),
    recorded_at  timestamptz NOT NULL DEFAULT now()
);
