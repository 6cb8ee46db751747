"""The lexical signal's statement, for fact versions (store.facts) and for episodes
(store.conversations): the idf-weighted share of the question's distinct stemmed words each
row holds, in (0, 1], over the rows of one scope believed at the as-of point.

A word's weight is its BM25 idf, ln(1 + (N - df + 0.5) / (df + 0.5)), over the N rows (df of
them contain it): a word most rows contain (a speaker's name) says little, a rare one much, and
a query word no row contains weighs most, so a row covering only the common part of a query
scores low. Parameters: $3 the question, $4 how many rows; the caller's row filters name the
others.
"""

from __future__ import annotations


def idf_coverage(*, table: str, key: str, newest: str, scoped: str) -> str:
    """The statement over `table` (alias `v`, a `lexemes` tsvector column) returning (id,
    coverage) best first, ties newest first: `key` is the row's id, `newest` what orders ties
    (descending), `scoped` the filter of the scope's rows believed at the as-of point."""
    return f"""
        WITH w AS (SELECT tsvector_to_array(to_tsvector('english', $3)) AS words),
        -- The OR query is built once: inside the row filter PostgreSQL would parse and
        -- stem it again for every row of the scope (to_tsquery is only STABLE).
        q AS MATERIALIZED (
            SELECT words,
                   CASE WHEN cardinality(words) > 0
                        THEN to_tsquery('english', array_to_string(words, ' | ')) END AS tsq
            FROM w
        ),
        -- A row's question words: weight A on them, keep only A (the stored lexemes carry
        -- to_tsvector's default weight D), in one pass over the row's tsvector rather than
        -- turning it into an array once per question word (bench/lexical_ab.py).
        matched AS MATERIALIZED (
            SELECT {key} AS id, {newest} AS newest,
                   tsvector_to_array(ts_filter(setweight(v.lexemes, 'A', q.words), '{{a}}'))
                       AS hits
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
        SELECT m.id,
               least(1.0, (SELECT COALESCE(sum(i.idf), 0) FROM idf i WHERE i.w = ANY(m.hits))
                          / total.idf) AS coverage
        FROM matched m, total
        ORDER BY coverage DESC, m.newest DESC
        LIMIT $4
        """
