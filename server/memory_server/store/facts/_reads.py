"""Reading facts: the live ones, versions believed as of a time, lexical matches, and one fact's
versions and history."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import asyncpg

from memory_server.memory.errors import NotFound
from memory_server.memory.facts.model import FactVersion, HistoryEvent, LiveFact
from memory_server.memory.identity import Scope
from memory_server.memory.ports import AsOf
from memory_server.store.facts._sql import (
    BELIEVED,
    LIVE,
    SCOPE_ID,
    VERSION_COLUMNS,
    OnPool,
    fact_uuid,
    fetch,
    live_facts,
    optional_id,
    read_version,
)
from memory_server.store.lexical import LEXICAL_NOW, LEXICAL_ROW_BUDGET, idf_coverage
from memory_server.store.rows import row_reader

_read_history_event = row_reader(HistoryEvent, version_id=optional_id)

_LEXICAL_BELIEVED = BELIEVED.format(v="$5::timestamptz", t="$6::timestamptz")
LEXICAL_STATEMENT = idf_coverage(
    table="fact_versions",
    key="v.id",
    newest="v.recorded_at",
    scoped=f"v.scope_id = {SCOPE_ID} AND {_LEXICAL_BELIEVED}",
)
"""The lexical signal's statement as of a past point (FactReads.lexical, whose docstring says
what it scores): it reads every version of the scope. Public, with LEXICAL_NOW, so that a
benchmark times, explains or compares the very statement the store sends."""


def lexical_statement(
    scope: Scope, query: str, k: int, as_of: AsOf
) -> tuple[str, tuple[object, ...]]:
    """The statement the store sends for a lexical search, and its parameters: LEXICAL_NOW
    ($1 username, $2 graphname, $3 the query, $4 how many, $5 LEXICAL_ROW_BUDGET) as of now,
    else LEXICAL_STATEMENT ($5 valid time, $6 transaction time of the as-of point)."""
    if as_of == AsOf():
        return LEXICAL_NOW, (scope.username, scope.graphname, query, k, LEXICAL_ROW_BUDGET)
    return LEXICAL_STATEMENT, lexical_arguments(scope, query, k, as_of)


def lexical_arguments(scope: Scope, query: str, k: int, as_of: AsOf) -> tuple[object, ...]:
    """LEXICAL_STATEMENT's parameters: $1 username, $2 graphname, $3 the query, $4 how many,
    $5 valid time and $6 transaction time of the as-of point (None: now, read by a scan)."""
    return (scope.username, scope.graphname, query, k, as_of.valid_time, as_of.transaction_time)


class FactReads(OnPool):
    async def live_facts(self, scope: Scope, *, timeout_s: float | None = None) -> list[LiveFact]:
        return await live_facts(self._pool, scope, timeout_s)

    async def versions(
        self,
        scope: Scope,
        version_ids: Sequence[str],
        as_of: AsOf,
        *,
        timeout_s: float | None = None,
    ) -> list[FactVersion]:
        """The given versions that belong to the scope and are believed at `as_of`."""
        rows = await fetch(
            self._pool,
            timeout_s,
            f"""SELECT {VERSION_COLUMNS} FROM fact_versions v
                WHERE v.scope_id = {SCOPE_ID} AND v.id = ANY($3::uuid[])
                  AND {BELIEVED.format(v="$4::timestamptz", t="$5::timestamptz")}""",
            scope.username,
            scope.graphname,
            [uuid.UUID(i) for i in version_ids],
            as_of.valid_time,
            as_of.transaction_time,
        )
        return [read_version(r) for r in rows]

    async def standing(
        self, scope: Scope, limit: int, *, timeout_s: float | None = None
    ) -> list[FactVersion]:
        """Live standing instructions, newest first."""
        rows = await fetch(
            self._pool,
            timeout_s,
            f"""SELECT {VERSION_COLUMNS} FROM fact_versions v
                WHERE v.scope_id = {SCOPE_ID} AND v.standing AND {LIVE}
                ORDER BY v.recorded_at DESC, v.id LIMIT $3""",
            scope.username,
            scope.graphname,
            limit,
        )
        return [read_version(r) for r in rows]

    async def lexical(
        self, scope: Scope, query: str, k: int, as_of: AsOf, *, timeout_s: float | None = None
    ) -> list[tuple[str, float]]:
        """Versions believed at `as_of` sharing words with the query, with the idf-weighted
        share of the query's distinct stemmed words each contains, in (0, 1].

        A word's weight is its BM25 idf, ln(1 + (N - df + 0.5) / (df + 0.5)), over the N
        versions of the scope believed at `as_of` (df of them contain it): a word most facts
        contain (a speaker's name) says little, a rare one much, and a query word no fact
        contains weighs most, so a fact covering only the common part of a query scores low.

        As of now, N and df are the scope's live versions, read from its lexicon, and the
        versions are found through the (scope, word) index, the question's rarest words first,
        up to LEXICAL_ROW_BUDGET rows (store/lexical.py); as of a past point the scope's
        versions are read and counted.
        """
        sql, arguments = lexical_statement(scope, query, k, as_of)
        rows = await fetch(self._pool, timeout_s, sql, *arguments)
        return [(str(r["id"]), float(r["coverage"])) for r in rows]

    async def common_lexemes(
        self,
        scope: Scope,
        share: float,
        at_least: int,
        as_of: AsOf,
        *,
        timeout_s: float | None = None,
    ) -> set[str]:
        """The stemmed words (as the lexical signal stems them) that more than `share` of the
        scope's versions believed at `as_of`, and at least `at_least` of them, contain: a word
        nearly every fact holds (the user's own name) says nothing about which fact is meant.
        As of now they are read from the scope's lexicon (its live versions), else counted."""
        if as_of == AsOf():
            rows = await fetch(
                self._pool,
                timeout_s,
                f"""SELECT l.lexeme AS w FROM scope_lexemes l
                    JOIN scope_lexicon c ON c.scope_id = l.scope_id
                    WHERE l.scope_id = {SCOPE_ID}
                      AND l.df > $3::float8 * c.live_versions AND l.df >= $4""",
                scope.username,
                scope.graphname,
                share,
                at_least,
            )
            return {str(r["w"]) for r in rows}
        believed = BELIEVED.format(v="$5::timestamptz", t="$6::timestamptz")
        rows = await fetch(
            self._pool,
            timeout_s,
            f"""
            WITH scoped AS MATERIALIZED (
                SELECT v.lexemes FROM fact_versions v
                WHERE v.scope_id = {SCOPE_ID} AND {believed}
            ),
            n AS (SELECT count(*)::float8 AS n FROM scoped)
            SELECT w FROM scoped, unnest(tsvector_to_array(scoped.lexemes)) w, n
            GROUP BY w, n.n
            HAVING count(*) > $3 * n.n AND count(*) >= $4
            """,
            scope.username,
            scope.graphname,
            share,
            at_least,
            as_of.valid_time,
            as_of.transaction_time,
        )
        return {str(r["w"]) for r in rows}

    async def lexemes_of(
        self, words: Sequence[str], *, timeout_s: float | None = None
    ) -> dict[str, list[str]]:
        """Each word's lexemes as the lexical signal stems them (none for a stop word)."""
        if not words:
            return {}
        rows = await fetch(
            self._pool,
            timeout_s,
            """SELECT tok, tsvector_to_array(to_tsvector('english', tok)) AS lx
               FROM unnest($1::text[]) tok""",
            list(dict.fromkeys(words)),
        )
        return {str(r["tok"]): list(r["lx"]) for r in rows}

    async def list_facts(
        self,
        scope: Scope,
        as_of: AsOf,
        limit: int,
        offset: int,
        *,
        timeout_s: float | None = None,
    ) -> list[FactVersion]:
        rows = await fetch(
            self._pool,
            timeout_s,
            f"""SELECT {VERSION_COLUMNS} FROM fact_versions v
                WHERE v.scope_id = {SCOPE_ID}
                  AND {BELIEVED.format(v="$3::timestamptz", t="$4::timestamptz")}
                ORDER BY v.recorded_at DESC, v.id LIMIT $5 OFFSET $6""",
            scope.username,
            scope.graphname,
            as_of.valid_time,
            as_of.transaction_time,
            limit,
            offset,
        )
        return [read_version(r) for r in rows]

    async def fact_versions(
        self, scope: Scope, fact_id: str, *, timeout_s: float | None = None
    ) -> list[FactVersion]:
        rows = await self._rows_of_fact(
            f"""SELECT {VERSION_COLUMNS} FROM fact_versions v
                WHERE v.scope_id = {SCOPE_ID} AND v.fact_id = $3
                ORDER BY v.recorded_at, v.valid_from, v.id""",
            scope,
            fact_id,
            timeout_s,
        )
        return [read_version(r) for r in rows]

    async def history(
        self, scope: Scope, fact_id: str, *, timeout_s: float | None = None
    ) -> list[HistoryEvent]:
        rows = await self._rows_of_fact(
            f"""SELECT h.event, h.at, h.version_id, h.conversation_id, h.message_id,
                       h.extractor, h.detail
                FROM fact_history h WHERE h.scope_id = {SCOPE_ID} AND h.fact_id = $3
                ORDER BY h.id""",
            scope,
            fact_id,
            timeout_s,
        )
        return [_read_history_event(r) for r in rows]

    async def _rows_of_fact(
        self, sql: str, scope: Scope, fact_id: str, timeout_s: float | None
    ) -> list[asyncpg.Record]:
        """What `sql` answers for the scope ($1, $2) and one of its facts ($3); NotFound when
        nothing (an id of another scope included)."""
        rows = await fetch(
            self._pool,
            timeout_s,
            sql,
            scope.username,
            scope.graphname,
            fact_uuid("fact_id", fact_id),
        )
        if not rows:
            raise NotFound(f"fact_id: no fact {fact_id!r}")
        return rows
