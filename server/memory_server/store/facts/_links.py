"""Semantic links between fact versions (migration 0004): what recall follows one hop, what
GetFact shows, and what the outbox writes once it has indexed a batch.

A link is undirected (stored once per pair) and bitemporal: believed from the later of its
two versions' recorded_at until either end stops being believed. The outbox actor writes and
closes links inside its claim transaction, so they commit together with the batch."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import asyncpg

from memory_server.memory.identity import Scope
from memory_server.memory.ports import AsOf, FactLink, LinkedVersion, LinkRecord
from memory_server.store.facts._sql import (
    BELIEVED,
    LIVE,
    SCOPE_ID,
    VERSION_COLUMNS,
    OnPool,
    fetch,
    read_version,
)

# The link predicate at transaction time $T (NULL = now), on fact_links `l`.
_LINK_BELIEVED = """l.recorded_at <= COALESCE({t}, now())
    AND (l.superseded_at IS NULL OR COALESCE({t}, now()) < l.superseded_at)"""


class FactLinks(OnPool):
    async def linked(
        self,
        scope: Scope,
        version_ids: Sequence[str],
        as_of: AsOf,
        *,
        neighbours: bool = False,
        timeout_s: float | None = None,
    ) -> list[LinkedVersion]:
        if not version_ids:
            return []
        # `= ANY($3)` rather than a join with unnest: the plan stays an index lookup per
        # seed when PostgreSQL switches the prepared statement to its generic plan (a join
        # with the unnested array became a scan of fact_links there, many times slower). The
        # linked version is looked up per found link, by its primary key, in a LATERAL
        # subquery that LIMIT keeps from being flattened: as a plain join, a scope whose
        # statistics were not yet analysed (just imported, or grown fast) was planned the
        # other way round, every version of the scope a loop over the links
        # (bench/README.md, "Figures behind the code").
        believed = _LINK_BELIEVED.format(t="$5::timestamptz")
        believed_v = BELIEVED.format(v="$4::timestamptz", t="$5::timestamptz")
        # A seed's neighbours: the versions of its conversation said just before and just
        # after it, the nearest believed at as-of on each side (fact_versions_by_conversation,
        # migration 0007). `n` is fact_versions under another alias, so BELIEVED applies.
        nearest = """(SELECT v.id FROM fact_versions v
                       WHERE v.scope_id = s.scope_id AND v.conversation_id = s.conversation_id
                         AND (v.valid_from, v.recorded_at, v.id) {op}
                             (s.valid_from, s.recorded_at, s.id)
                         AND {believed_v}
                       ORDER BY v.valid_from {order}, v.recorded_at {order}, v.id {order}
                       LIMIT 1)"""
        before = nearest.format(op="<", order="DESC", believed_v=believed_v)
        after = nearest.format(op=">", order="ASC", believed_v=believed_v)
        rows = await fetch(
            self._pool,
            timeout_s,
            f"""SELECT e.seed, e.score, e.neighbour, {VERSION_COLUMNS}
                FROM (SELECT l.source_version_id AS seed, l.target_version_id AS other, l.score,
                             false AS neighbour
                      FROM fact_links l
                      WHERE l.source_version_id = ANY($3::uuid[]) AND {believed}
                      UNION ALL
                      SELECT l.target_version_id, l.source_version_id, l.score, false
                      FROM fact_links l
                      WHERE l.target_version_id = ANY($3::uuid[]) AND {believed}
                      UNION ALL
                      SELECT s.id, n.id, 1.0::float8, true
                      FROM fact_versions s
                      CROSS JOIN LATERAL ({before} UNION ALL {after}) n
                      WHERE $6 AND s.id = ANY($3::uuid[]) AND s.scope_id = {SCOPE_ID}
                        AND s.conversation_id <> '') e
                CROSS JOIN LATERAL (
                    SELECT * FROM fact_versions v
                    WHERE v.id = e.other AND v.scope_id = {SCOPE_ID} AND {believed_v}
                    LIMIT 1) v""",
            scope.username,
            scope.graphname,
            [uuid.UUID(i) for i in version_ids],
            as_of.valid_time,
            as_of.transaction_time,
            neighbours,
        )
        return [
            LinkedVersion(str(r["seed"]), read_version(r), float(r["score"]), r["neighbour"])
            for r in rows
        ]

    async def live_links(
        self, scope: Scope, version_ids: Sequence[str], *, timeout_s: float | None = None
    ) -> list[FactLink]:
        if not version_ids:
            return []
        rows = await fetch(
            self._pool,
            timeout_s,
            f"""WITH mine AS (SELECT unnest($3::uuid[]) AS id),
                ends AS (
                    SELECT l.source_version_id AS mine, l.target_version_id AS other, l.score,
                           l.recorded_at
                    FROM fact_links l JOIN mine ON l.source_version_id = mine.id
                    WHERE l.scope_id = {SCOPE_ID} AND l.superseded_at IS NULL
                    UNION ALL
                    SELECT l.target_version_id, l.source_version_id, l.score, l.recorded_at
                    FROM fact_links l JOIN mine ON l.target_version_id = mine.id
                    WHERE l.scope_id = {SCOPE_ID} AND l.superseded_at IS NULL)
                SELECT e.mine, e.other, e.score, e.recorded_at, v.fact_id
                FROM ends e JOIN fact_versions v ON v.id = e.other
                JOIN fact_versions m ON m.id = e.mine
                WHERE {LIVE} AND m.superseded_at IS NULL AND m.valid_to IS NULL
                ORDER BY e.score DESC, e.other""",
            scope.username,
            scope.graphname,
            [uuid.UUID(i) for i in version_ids],
        )
        return [
            FactLink(
                str(r["mine"]),
                str(r["fact_id"]),
                str(r["other"]),
                float(r["score"]),
                r["recorded_at"],
            )
            for r in rows
        ]


async def record_links(
    conn: asyncpg.Connection, pairs: Sequence[tuple[str, str, float]]
) -> list[LinkRecord]:
    """Links (source, target, cosine) between versions of one scope that are both still live
    (others are skipped: an end closed or erased meanwhile). Idempotent: a pair already
    linked is returned as stored, so a replayed batch sends the index the same edges."""
    if not pairs:
        return []
    rows = await conn.fetch(
        """INSERT INTO fact_links AS l (scope_id, source_version_id, target_version_id, score,
                                        recorded_at)
           SELECT s.scope_id, s.id, t.id, p.score, GREATEST(s.recorded_at, t.recorded_at)
           FROM unnest($1::uuid[], $2::uuid[], $3::real[]) AS p(source, target, score)
           JOIN fact_versions s ON s.id = p.source
           JOIN fact_versions t ON t.id = p.target AND t.scope_id = s.scope_id
           WHERE s.superseded_at IS NULL AND s.valid_to IS NULL
             AND t.superseded_at IS NULL AND t.valid_to IS NULL AND s.id <> t.id
           ON CONFLICT (LEAST(source_version_id, target_version_id),
                        GREATEST(source_version_id, target_version_id))
           DO UPDATE SET score = l.score
           RETURNING l.source_version_id, l.target_version_id, l.score, l.recorded_at,
                     l.superseded_at""",
        [uuid.UUID(p[0]) for p in pairs],
        [uuid.UUID(p[1]) for p in pairs],
        [p[2] for p in pairs],
    )
    return [_link_record(r) for r in rows]


async def close_links(conn: asyncpg.Connection, version_ids: Sequence[str]) -> list[LinkRecord]:
    """Closes the links of these versions that are no longer believed now, at the moment the
    version stopped being believed. Returns every link of those versions, already closed ones
    included, so a replayed batch closes the index's edges too."""
    if not version_ids:
        return []
    rows = await conn.fetch(
        """WITH closed AS (
               SELECT id, superseded_at FROM fact_versions
               WHERE id = ANY($1::uuid[]) AND superseded_at IS NOT NULL),
           ends AS (
               SELECT l.id, c.superseded_at FROM fact_links l
               JOIN closed c ON l.source_version_id = c.id
               UNION ALL
               SELECT l.id, c.superseded_at FROM fact_links l
               JOIN closed c ON l.target_version_id = c.id)
           UPDATE fact_links l
           SET superseded_at = COALESCE(l.superseded_at, GREATEST(l.recorded_at, e.at))
           FROM (SELECT id, min(superseded_at) AS at FROM ends GROUP BY id) e
           WHERE l.id = e.id
           RETURNING l.source_version_id, l.target_version_id, l.score, l.recorded_at,
                     l.superseded_at""",
        [uuid.UUID(v) for v in version_ids],
    )
    return [_link_record(r) for r in rows]


def _link_record(r: asyncpg.Record) -> LinkRecord:
    return LinkRecord(
        str(r["source_version_id"]),
        str(r["target_version_id"]),
        float(r["score"]),
        r["recorded_at"],
        r["superseded_at"],
    )
