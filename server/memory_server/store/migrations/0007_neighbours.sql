-- Neighbours: recall brings in the facts said just before and just after a hit in the same
-- conversation (provenance: a learned fact's conversation, or AddFact's conversation_id), in
-- the order they were said (valid_from, then recorded_at and id for facts said together).
-- Each seed looks up its two neighbours by this index, newest or oldest first, and stops at
-- the first version believed at the as-of point.
CREATE INDEX fact_versions_by_conversation
    ON fact_versions (scope_id, conversation_id, valid_from, recorded_at, id)
    WHERE conversation_id <> '';
