-- Several servers sharing one database: the scope write lock, and outbox claims in order.

-- The scope write lock: several servers share this database, and each one's actors order only
-- the writes that reach it, so every write transaction of a (username, graphname) takes this
-- lock first. It is a transaction-level advisory lock: released at commit or rollback, so a
-- crashed server never leaves one behind, and never held across an LLM or embedding call.
--
-- Key space: the two-int4 form, class 0x676D656D ('gmem'), object = the first 32 bits of the
-- scope_hash (memory_server.memory.identity). PostgreSQL keeps the one-int8 form in a separate
-- key space, so the migration lock (store/schema.py) can never collide with it. Two scopes
-- sharing 32 bits only wait for each other now and then; correctness does not depend on it.
CREATE FUNCTION memory_lock_scope(p_scope_hash text) RETURNS void
LANGUAGE sql VOLATILE AS $$
    SELECT pg_advisory_xact_lock(1735222637, ('x' || left(p_scope_hash, 8))::bit(32)::int4)
$$;

-- memory_append_message (0001) again, taking the scope write lock first. With it, a scope's
-- messages get their seq in the order their transactions commit: when a message is stored,
-- every message of its conversation with a smaller seq is committed, so "seq < mine" is
-- exactly what was stored before it, whichever server stored what. A retried message id waits
-- for the first attempt and returns its result.
CREATE OR REPLACE FUNCTION memory_append_message(
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
    PERFORM memory_lock_scope(p_scope_hash);
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

-- The outbox claim looks for older rows of the same version (store/facts.py claim_outbox).
CREATE INDEX vector_outbox_by_version ON vector_outbox (version_id, id);
