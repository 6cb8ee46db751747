-- The lexical (idf) query asks for one scope's versions whose lexemes match the question's
-- words. A GIN index on lexemes alone let PostgreSQL match the words in every scope's
-- versions and filter the scope afterwards (issue 17 saw 116,308 rows from all scopes for a
-- 1,000-fact scope in a 211,000-row table). Without it, the scope's btree indexes
-- (fact_versions_by_scope, fact_versions_live_by_scope) always confine the scan and the words
-- are a filter on that scope's rows only. Measured (bench/lexical_plan.py, bench/README.md):
-- as fast or faster at every scope size, and a GIN index on (scope_id, lexemes) with
-- btree_gin was slower for small scopes (GIN intersects the words' posting lists of all
-- scopes). Ingest no longer maintains a full-text index either.
DROP INDEX fact_versions_lexemes;
