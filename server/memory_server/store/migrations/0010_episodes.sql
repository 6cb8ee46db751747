-- Episodes (issue 30): every stored user and assistant message, as stored (redacted), is
-- embedded through the outbox and searchable within its scope across conversations.
--
-- The vector index keeps an episode under its own partition key, the scope's hash followed by
-- "/episodes" (memory_server.memory.identity.Scope.episode_partition), so fact searches and
-- links never meet one and both backends need no new table or vertex type. An episode's id in
-- the index and the outbox is its message's seq written as a uuid (memory_episode_id).

-- Which index an outbox row is for. Fact rows name a fact version; episode rows a message.
ALTER TABLE vector_outbox ADD COLUMN kind text NOT NULL DEFAULT 'fact'
    CHECK (kind IN ('fact', 'episode'));

-- Transaction time of a message: when this database stored it. `created_at` is its valid time
-- (when it was said), which an import or a replay sets in the past. Rows stored before this
-- migration take their created_at.
ALTER TABLE messages ADD COLUMN recorded_at timestamptz;
UPDATE messages SET recorded_at = created_at;
ALTER TABLE messages ALTER COLUMN recorded_at SET DEFAULT now(),
                     ALTER COLUMN recorded_at SET NOT NULL;

-- False once the message may no longer be recalled as an episode: past retention, or after
-- ForgetScope kept the conversations. The row itself stays (conversation history).
ALTER TABLE messages ADD COLUMN recallable boolean NOT NULL DEFAULT true;
-- The lexical signal of episode search, as for fact versions (0002). Rewrites the table once.
ALTER TABLE messages ADD COLUMN lexemes tsvector
    GENERATED ALWAYS AS (to_tsvector('english', content)) STORED;
-- Retention finds the recallable messages older than its cutoff by this index.
CREATE INDEX messages_recallable_by_time ON messages (created_at) WHERE recallable;

CREATE FUNCTION memory_episode_id(p_seq bigint) RETURNS uuid
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT lpad(to_hex(p_seq), 32, '0')::uuid
$$;

-- A server with episodes on sets graphrag_memory.episodes = 'on' on its connections
-- (store/database.py): its new user and assistant messages get an upsert row in the same
-- statement that stores them. Another server with episodes off stores messages without one.
CREATE FUNCTION memory_episodes_added() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(current_setting('graphrag_memory.episodes', true), '') = 'on' THEN
        INSERT INTO vector_outbox (scope_hash, op, version_id, kind)
        SELECT s.scope_hash, 'upsert', memory_episode_id(n.seq), 'episode'
        FROM added n JOIN scopes s ON s.id = n.scope_id
        WHERE n.role IN ('user', 'assistant') AND n.content <> ''
        ORDER BY n.seq;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER messages_episodes_added AFTER INSERT ON messages
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION memory_episodes_added();

-- DeleteConversation (and any other removal of messages) takes their vectors with them, on
-- every server whatever its setting. When the scope itself is gone (ForgetScope with its
-- conversations), its purge row erases the whole partition instead: no row per message.
CREATE FUNCTION memory_episodes_removed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO vector_outbox (scope_hash, op, version_id, kind)
    SELECT s.scope_hash, 'delete', memory_episode_id(g.seq), 'episode'
    FROM gone g JOIN scopes s ON s.id = g.scope_id
    WHERE g.recallable AND g.role IN ('user', 'assistant')
    ORDER BY g.seq;
    RETURN NULL;
END
$$;
CREATE TRIGGER messages_episodes_removed AFTER DELETE ON messages
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION memory_episodes_removed();

-- memory_episode_id's inverse: the seq of an episode's id (read-your-writes joins the outbox's
-- waiting episodes to their messages by it).
CREATE FUNCTION episode_seq_of(p_id uuid) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT ('x' || right(replace(p_id::text, '-', ''), 16))::bit(64)::bigint
$$;
