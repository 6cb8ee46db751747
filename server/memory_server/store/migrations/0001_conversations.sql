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
    -- Tokens of the message's line in the context block (memory_server.memory.stm).
    context_tokens   integer NOT NULL CHECK (context_tokens >= 0),
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
    context_tokens   integer NOT NULL CHECK (context_tokens >= 0),
    through_seq      bigint NOT NULL,
    summarizer       text NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE (conversation_pk, through_seq)
);

-- Appends one message in one round trip and one transaction: finds or creates the scope and the
-- conversation, checks the parent, inserts, touches the conversation. A message id already
-- stored in the scope with the same conversation, role and content is returned as it is
-- (idempotent retry). Errors carry SQLSTATEs of our own, mapped by the store:
--   GMNF1 no such conversation (when p_create is false), GMNF2 no such parent message,
--   GMAE1 message id taken by a different message.
CREATE FUNCTION memory_append_message(
    p_username text, p_graphname text, p_scope_hash text, p_conversation_id text,
    p_create boolean, p_conversation_name text, p_message_id text, p_role text,
    p_content text, p_tokens integer, p_context_tokens integer, p_model text, p_parent_id text,
    p_response_time_seconds double precision, p_feedback smallint, p_comment text,
    p_created_at timestamptz,
    OUT out_seq bigint, OUT out_created_at timestamptz, OUT out_inserted boolean,
    OUT out_conversation_created boolean)
LANGUAGE plpgsql AS $$
DECLARE
    v_scope bigint;
    v_conversation bigint;
    v_existing record;
BEGIN
    out_conversation_created := false;
    SELECT id INTO v_scope FROM scopes WHERE username = p_username AND graphname = p_graphname;
    IF v_scope IS NULL AND p_create THEN
        INSERT INTO scopes (username, graphname, scope_hash)
        VALUES (p_username, p_graphname, p_scope_hash)
        ON CONFLICT DO NOTHING RETURNING id INTO v_scope;
        IF v_scope IS NULL THEN  -- created concurrently
            SELECT id INTO v_scope FROM scopes
            WHERE username = p_username AND graphname = p_graphname;
        END IF;
    END IF;
    SELECT id INTO v_conversation FROM conversations
    WHERE scope_id = v_scope AND conversation_id = p_conversation_id;
    IF v_conversation IS NULL THEN
        IF NOT p_create THEN
            RAISE EXCEPTION 'no such conversation' USING ERRCODE = 'GMNF1';
        END IF;
        INSERT INTO conversations (scope_id, conversation_id, name)
        VALUES (v_scope, p_conversation_id, p_conversation_name)
        ON CONFLICT DO NOTHING RETURNING id INTO v_conversation;
        IF v_conversation IS NULL THEN
            SELECT id INTO v_conversation FROM conversations
            WHERE scope_id = v_scope AND conversation_id = p_conversation_id;
        ELSE
            out_conversation_created := true;
        END IF;
    END IF;
    IF p_parent_id <> '' AND NOT EXISTS (
        SELECT 1 FROM messages WHERE conversation_pk = v_conversation AND message_id = p_parent_id
    ) THEN
        RAISE EXCEPTION 'no such parent message' USING ERRCODE = 'GMNF2';
    END IF;
    INSERT INTO messages (scope_id, conversation_pk, message_id, role, content, tokens,
                          context_tokens, model, parent_id, response_time_seconds, feedback,
                          comment, created_at)
    VALUES (v_scope, v_conversation, p_message_id, p_role, p_content, p_tokens,
            p_context_tokens, p_model, p_parent_id, p_response_time_seconds, p_feedback,
            p_comment, COALESCE(p_created_at, now()))
    ON CONFLICT (scope_id, message_id) DO NOTHING
    RETURNING seq, created_at INTO out_seq, out_created_at;
    IF out_seq IS NULL THEN
        SELECT seq, created_at, conversation_pk, role, content INTO v_existing
        FROM messages WHERE scope_id = v_scope AND message_id = p_message_id;
        IF v_existing.conversation_pk <> v_conversation OR v_existing.role <> p_role
           OR v_existing.content <> p_content THEN
            RAISE EXCEPTION 'message id already used' USING ERRCODE = 'GMAE1';
        END IF;
        out_seq := v_existing.seq;
        out_created_at := v_existing.created_at;
        out_inserted := false;
    ELSE
        out_inserted := true;
        UPDATE conversations SET updated_at = now() WHERE id = v_conversation;
    END IF;
END
$$;
