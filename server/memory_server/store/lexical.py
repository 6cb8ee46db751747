"""The lexical signal's statements, for fact versions (store.facts) and for episodes
(store.conversations): the idf-weighted share of the question's distinct stemmed words each
row holds, in (0, 1], over the rows of one scope believed at the as-of point. `idf_coverage`
reads and counts the scope's rows; `LEXICAL_NOW`, for fact versions believed now, reads the
scope's lexicon and its (scope, word) index instead (migration 0012). Both end alike
(`_RANKED`), so they rank the same rows the same way.

A word's weight is its BM25 idf, ln(1 + (N - df + 0.5) / (df + 0.5)), over the N rows (df of
them contain it): a word most rows contain (a speaker's name) says little, a rare one much, and
a query word no row contains weighs most, so a row covering only the common part of a query
scores low. Parameters: $3 the question, $4 how many rows; the caller's row filters name the
others.
"""

from __future__ import annotations

# A row's question words: weight A on them, keep only A (the stored lexemes carry to_tsvector's
# default weight D), in one pass over the row's tsvector rather than turning it into an array
# once per question word (bench/lexical_ab.py). Needs `v` (the row) and `q.words`.
_HITS = "tsvector_to_array(ts_filter(setweight(v.lexemes, 'A', q.words), '{a}')) AS hits"

# Each matched row's coverage, best first, ties newest first. Needs the CTEs `matched` (id,
# newest, hits), `idf` (w, idf) and `total` (idf: the question's words' idf summed); $4 is how
# many rows.
_RANKED = """
        SELECT m.id,
               least(1.0, (SELECT COALESCE(sum(i.idf), 0) FROM idf i WHERE i.w = ANY(m.hits))
                          / total.idf) AS coverage
        FROM matched m, total
        ORDER BY coverage DESC, m.newest DESC
        LIMIT $4
        """


def idf_coverage(*, table: str, key: str, newest: str, scoped: str) -> str:
    """The statement over `table` (alias `v`, a `lexemes` tsvector column) returning (id,
    coverage) best first, ties newest first: `key` is the row's id, `newest` what orders ties
    (descending), `scoped` the filter of the scope's rows believed at the as-of point."""
    return f"""
        WITH w AS (SELECT tsvector_to_array(to_tsvector('english', $3)) AS words),
        -- The OR query is built once: inside the row filter PostgreSQL would parse it again
        -- for every row of the scope. Its words are the stems as stored, each quoted for the
        -- text-to-tsquery cast, which stems nothing: to_tsquery('english', ...) stemmed them a
        -- second time ("basketbal" became "basketb", "other" a stop word) and so missed 40 of
        -- the 961 stems of LoCoMo's questions.
        q AS MATERIALIZED (
            SELECT words,
                   CASE WHEN cardinality(words) > 0
                        THEN array_to_string(ARRAY(
                                 SELECT '''' || replace(replace(x, '\\', '\\\\'), '''', '''''')
                                        || ''''
                                 FROM unnest(words) x), ' | ')::tsquery END AS tsq
            FROM w
        ),
        matched AS MATERIALIZED (
            SELECT {key} AS id, {newest} AS newest, {_HITS}
            FROM {table} v, q
            WHERE v.lexemes @@ q.tsq AND {scoped}
        ),
        n AS (SELECT count(*)::float8 AS n FROM {table} v WHERE {scoped}),
        -- Materialized: the idf below names df twice, and each would count again.
        df AS MATERIALIZED (
            SELECT w, (SELECT count(*) FROM matched m WHERE w = ANY(m.hits)) AS df
            FROM q, unnest(q.words) w
        ),
        idf AS (
            SELECT d.w, ln(1 + (n.n - d.df + 0.5) / (d.df + 0.5)) AS idf FROM df d, n
        ),
        total AS (SELECT sum(idf) AS idf FROM idf)
        {_RANKED}"""


# How many rows a search as of now reads at most: the question's words are taken rarest first
# while the live versions holding them add up to no more than this (the rarest word is always
# taken, however many hold it). A word past it is common in the scope and weighs little;
# rows found through a rarer word still count it. Scopes of up to about this many facts read
# every row holding a question word, as the full scan did.
LEXICAL_ROW_BUDGET = 2000


LEXICAL_NOW = f"""
        WITH s AS MATERIALIZED (SELECT id FROM scopes WHERE username = $1 AND graphname = $2),
        w AS MATERIALIZED (
            SELECT DISTINCT unnest(tsvector_to_array(to_tsvector('english', $3))) AS w
        ),
        n AS MATERIALIZED (
            SELECT COALESCE((SELECT c.live_versions FROM scope_lexicon c, s
                             WHERE c.scope_id = s.id), 0)::float8 AS n
        ),
        d AS MATERIALIZED (
            SELECT w.w, COALESCE(l.df, 0) AS df,
                   sum(COALESCE(l.df, 0)) OVER (ORDER BY COALESCE(l.df, 0), w.w) AS upto
            FROM w CROSS JOIN s
            LEFT JOIN scope_lexemes l ON l.scope_id = s.id AND l.lexeme = w.w
        ),
        idf AS MATERIALIZED (
            SELECT d.w, ln(1 + (greatest(n.n, d.df) - d.df + 0.5) / (d.df + 0.5)) AS idf
            FROM d, n
        ),
        total AS (SELECT sum(idf) AS idf FROM idf),
        q AS MATERIALIZED (
            SELECT (SELECT array_agg(w) FROM w) AS words,
                   (SELECT array_agg(s.id::text || ' ' || d.w) FROM d
                    WHERE d.df > 0 AND (d.upto <= $5 OR d.upto = d.df)) AS keys
            FROM s
        ),
        matched AS MATERIALIZED (
            SELECT v.id, v.recorded_at AS newest, {_HITS}
            FROM fact_versions v, q
            WHERE memory_scoped_lexemes(v.scope_id, v.lexemes) && q.keys
              AND v.superseded_at IS NULL
              AND v.valid_from <= now() AND (v.valid_to IS NULL OR now() < v.valid_to)
        )
        {_RANKED}"""
"""The lexical statement over fact versions believed now (FactReads.lexical), reading the
scope's lexicon instead of its rows: N and each word's df are the scope's live versions, and
the rows are found through the (scope, word) index, rarest words first within
LEXICAL_ROW_BUDGET. Parameters: $1 username, $2 graphname, $3 the question, $4 how many rows,
$5 the row budget."""
