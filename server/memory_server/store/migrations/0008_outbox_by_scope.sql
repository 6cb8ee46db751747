-- Read your own writes: a search also scores the scope's versions still waiting in the outbox
-- (outbox/fresh.py), so it finds them by this index, not by scanning every scope's rows.
CREATE INDEX vector_outbox_upserts_by_scope
    ON vector_outbox (scope_hash, id)
    WHERE op = 'upsert';
