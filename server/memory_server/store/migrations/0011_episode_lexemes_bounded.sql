-- Episode search, bounded (issue 30).
--
-- An episode's words are read from the first 8,192 characters of its message, as its vector is
-- made from the first 1,000 (memory_server.memory.identity.EPISODE_EMBED_CHARS): a pasted
-- document of 60 KiB costs an import 1.3 ms of to_tsvector instead of 8.7 ms (50 of them: 67 ms
-- against 435 ms, this machine), and its stored lexemes, TOAST and WAL shrink with it
-- (tests/test_no_stall.py imports 300 of them while another scope's turns go on). Words past
-- that point are still in the conversation's history; episode search does not find a message
-- by them. Rewrites the table once.
ALTER TABLE messages DROP COLUMN lexemes;
ALTER TABLE messages ADD COLUMN lexemes tsvector
    GENERATED ALWAYS AS (to_tsvector('english', left(content, 8192))) STORED;

-- The lexical signal reads a scope's newest messages (store/conversations/_episodes.py,
-- EPISODE_LEXICAL_WINDOW): found newest first by this index.
CREATE INDEX messages_by_scope ON messages (scope_id, seq);
