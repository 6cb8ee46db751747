-- Conversation memory: scopes, conversations, messages, rolling summaries.
-- Long-term memory (facts, fact versions, fact history, outbox) arrives in later migrations and
-- hangs off `scopes`.

CREATE TABLE scopes (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    username    text NOT NULL,
    graphname   text NOT NULL,
    -- memory_server.memory.identity.scope_hash: partitions vector indexes, keys advisory locks.
    scope_hash  text NOT NULL UNIQUE,
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (username, graphname)
);

CREATE TABLE conversations (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    scope_id        bigint NOT NULL REFERENCES scopes (id) ON DELETE CASCADE,
    -- Unique per scope only: another user reusing an id must not learn that it exists.
    conversation_id text NOT NULL,
    name            text NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    message_count   bigint NOT NULL DEFAULT 0,
    UNIQUE (scope_id, conversation_id)
);
CREATE INDEX conversations_recent ON conversations (scope_id, updated_at DESC, id DESC);

CREATE TABLE messages (
    -- Global insertion order; orders the messages of a conversation.
    seq              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    scope_id         bigint NOT NULL REFERENCES scopes (id) ON DELETE CASCADE,
    conversation_pk  bigint NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    message_id       text NOT NULL,
    role             text NOT NULL CHECK (role IN ('user', 'assistant', 'system')),
    content          text NOT NULL,
    tokens           integer NOT NULL CHECK (tokens >= 0),
    model            text NOT NULL DEFAULT '',
    parent_id        text NOT NULL DEFAULT '',
    response_time_seconds double precision NOT NULL DEFAULT 0,
    feedback         smallint NOT NULL DEFAULT 0 CHECK (feedback IN (0, 1, 2)),
    comment          text NOT NULL DEFAULT '',
    created_at       timestamptz NOT NULL DEFAULT now(),
    feedback_at      timestamptz,
    UNIQUE (scope_id, message_id)
);
CREATE INDEX messages_by_conversation ON messages (conversation_pk, seq);

-- Append-only: each compaction adds a version; the newest (highest through_seq) is current.
-- The watermark through_seq says which messages the summary covers; messages are never deleted
-- by compaction.
CREATE TABLE conversation_summaries (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    conversation_pk  bigint NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    content          text NOT NULL,
    tokens           integer NOT NULL CHECK (tokens >= 0),
    through_seq      bigint NOT NULL,
    summarizer       text NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE (conversation_pk, through_seq)
);
