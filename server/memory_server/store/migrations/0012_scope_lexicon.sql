-- Lexical search without scanning the scope (issue 31).
--
-- Until now the lexical signal read every version of the scope to find the ones holding the
-- question's words and to count N (171 ms at 100,000 facts, bench/README.md). Two things
-- replace the scan for a search as of now (store/lexical.py, LEXICAL_NOW):
--
-- 1. The scope's lexicon, kept by triggers in the transaction that changes the versions, so
--    every server sharing this database reads the same figures without a cache to invalidate:
--    per scope, how many versions are live (current in both times) and, per stemmed word, how
--    many live versions hold it (df). A word's idf and the scope's common words are read from
--    it instead of counted.
-- 2. A GIN index whose keys are (scope, word) pairs, written 'scope_id word': its posting lists
--    hold one scope's rows of one word, so a search reads the rows holding the question's
--    rarer words in its own scope and nothing else. (A GIN index on lexemes alone matched every
--    scope's rows, one on (scope_id, lexemes) with btree_gin intersected the words' lists of
--    all scopes with the scope's: migration 0006.) Only versions not superseded are indexed:
--    a search as of now never reads the others.

CREATE TABLE scope_lexicon (
    scope_id       bigint PRIMARY KEY REFERENCES scopes (id) ON DELETE CASCADE,
    live_versions  integer NOT NULL
);

CREATE TABLE scope_lexemes (
    scope_id  bigint NOT NULL REFERENCES scopes (id) ON DELETE CASCADE,
    lexeme    text NOT NULL,
    df        integer NOT NULL,
    PRIMARY KEY (scope_id, lexeme)
);

-- The index keys of one version: its stemmed words, each prefixed with the scope's id.
CREATE FUNCTION memory_scoped_lexemes(p_scope_id bigint, p_lexemes tsvector) RETURNS text[]
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT array_agg(p_scope_id::text || ' ' || w) FROM unnest(tsvector_to_array(p_lexemes)) w
$$;

CREATE INDEX fact_versions_scoped_lexemes ON fact_versions
    USING gin (memory_scoped_lexemes(scope_id, lexemes)) WITH (fastupdate = off)
    WHERE superseded_at IS NULL;

-- Adds `sign` (1 or -1) for each of the given live versions (parallel arrays) to its scope's
-- figures. Rows are written in (scope, word) order. Writers of one scope already hold its
-- write lock (0003); the order keeps any other pair of writers from deadlocking. A removal
-- only updates: when a scope is deleted its lexicon goes first (cascade), and nothing may
-- insert a row for it again.
CREATE FUNCTION memory_lexicon_add(p_scope_ids bigint[], p_lexemes tsvector[], p_sign integer)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF p_scope_ids IS NULL THEN
        RETURN;
    END IF;
    IF p_sign > 0 THEN
        INSERT INTO scope_lexicon (scope_id, live_versions)
        SELECT s, count(*) FROM unnest(p_scope_ids) s GROUP BY s ORDER BY s
        ON CONFLICT (scope_id) DO UPDATE
            SET live_versions = scope_lexicon.live_versions + EXCLUDED.live_versions;
        INSERT INTO scope_lexemes (scope_id, lexeme, df)
        SELECT r.s, w, count(*)
        FROM unnest(p_scope_ids, p_lexemes) r (s, l), unnest(tsvector_to_array(r.l)) w
        GROUP BY r.s, w ORDER BY r.s, w
        ON CONFLICT (scope_id, lexeme) DO UPDATE SET df = scope_lexemes.df + EXCLUDED.df;
    ELSE
        UPDATE scope_lexicon c SET live_versions = c.live_versions - d.n
        FROM (SELECT s, count(*) AS n FROM unnest(p_scope_ids) s GROUP BY s) d
        WHERE c.scope_id = d.s;
        UPDATE scope_lexemes x SET df = x.df - d.n
        FROM (SELECT r.s, w, count(*) AS n
              FROM unnest(p_scope_ids, p_lexemes) r (s, l), unnest(tsvector_to_array(r.l)) w
              GROUP BY r.s, w) d
        WHERE x.scope_id = d.s AND x.lexeme = d.w;
        DELETE FROM scope_lexemes x
        WHERE x.scope_id = ANY (p_scope_ids) AND x.df <= 0;
    END IF;
END
$$;

-- One statement's versions, through its transition tables: the live ones inserted count, the
-- live ones deleted or made not live (superseded, or ended in valid time) stop counting.
CREATE FUNCTION memory_lexicon_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM memory_lexicon_add(array_agg(scope_id), array_agg(lexemes), 1)
    FROM new_versions WHERE superseded_at IS NULL AND valid_to IS NULL;
    RETURN NULL;
END
$$;

CREATE FUNCTION memory_lexicon_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM memory_lexicon_add(array_agg(scope_id), array_agg(lexemes), -1)
    FROM old_versions WHERE superseded_at IS NULL AND valid_to IS NULL;
    RETURN NULL;
END
$$;

CREATE FUNCTION memory_lexicon_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM memory_lexicon_add(array_agg(o.scope_id), array_agg(o.lexemes), -1)
    FROM old_versions o JOIN new_versions n ON n.id = o.id
    WHERE o.superseded_at IS NULL AND o.valid_to IS NULL
      AND NOT (n.superseded_at IS NULL AND n.valid_to IS NULL);
    PERFORM memory_lexicon_add(array_agg(n.scope_id), array_agg(n.lexemes), 1)
    FROM old_versions o JOIN new_versions n ON n.id = o.id
    WHERE n.superseded_at IS NULL AND n.valid_to IS NULL
      AND NOT (o.superseded_at IS NULL AND o.valid_to IS NULL);
    RETURN NULL;
END
$$;

CREATE TRIGGER fact_versions_lexicon_insert AFTER INSERT ON fact_versions
    REFERENCING NEW TABLE AS new_versions
    FOR EACH STATEMENT EXECUTE FUNCTION memory_lexicon_inserted();
CREATE TRIGGER fact_versions_lexicon_delete AFTER DELETE ON fact_versions
    REFERENCING OLD TABLE AS old_versions
    FOR EACH STATEMENT EXECUTE FUNCTION memory_lexicon_deleted();
CREATE TRIGGER fact_versions_lexicon_update AFTER UPDATE ON fact_versions
    REFERENCING OLD TABLE AS old_versions NEW TABLE AS new_versions
    FOR EACH STATEMENT EXECUTE FUNCTION memory_lexicon_updated();

-- The figures of the versions already stored.
SELECT memory_lexicon_add(array_agg(scope_id), array_agg(lexemes), 1)
FROM fact_versions WHERE superseded_at IS NULL AND valid_to IS NULL;
