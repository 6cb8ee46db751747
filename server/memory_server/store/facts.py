"""PostgreSQL adapter for long-term facts: bitemporal versions, history and the vector outbox.

Every fact change writes its version rows, its history rows and its outbox rows in one
transaction, so the vector index can always be brought to exactly what PostgreSQL says.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta

import asyncpg

from memory_server.memory.errors import InvalidArgument, NotFound
from memory_server.memory.facts import (
    AppliedChange,
    Candidate,
    Decision,
    FactKind,
    FactVersion,
    HistoryEvent,
    LiveFact,
    Provenance,
    ReconciledCandidate,
)
from memory_server.memory.identity import Scope
from memory_server.memory.ports import AsOf, Revise
from memory_server.store.scope_lock import lock_scope

# The belief predicate on fact_versions `v`, with $V (valid time) and $T (transaction time)
# bound by the caller; NULL means now.
_BELIEVED = """v.recorded_at <= COALESCE({t}, now())
    AND (v.superseded_at IS NULL OR COALESCE({t}, now()) < v.superseded_at)
    AND v.valid_from <= COALESCE({v}, now())
    AND (v.valid_to IS NULL OR COALESCE({v}, now()) < v.valid_to)"""
_LIVE = "v.superseded_at IS NULL AND v.valid_to IS NULL"

_VERSION_COLUMNS = """v.id AS version_id, v.fact_id, v.text, v.kind, v.valid_from, v.valid_to,
    v.recorded_at, v.superseded_at, v.conversation_id, v.message_id, v.extractor, v.standing"""

_SCOPE_ID = "(SELECT id FROM scopes WHERE username = $1 AND graphname = $2)"


async def _live_facts(db: asyncpg.Pool | asyncpg.Connection, scope: Scope) -> list[LiveFact]:
    rows = await db.fetch(
        f"""SELECT v.fact_id, v.id, v.text, v.kind FROM fact_versions v
            WHERE v.scope_id = {_SCOPE_ID} AND {_LIVE} ORDER BY v.recorded_at, v.id""",
        scope.username,
        scope.graphname,
    )
    return [LiveFact(str(r["fact_id"]), str(r["id"]), r["text"], FactKind(r["kind"])) for r in rows]


def _version(row: asyncpg.Record) -> FactVersion:
    return FactVersion(
        version_id=str(row["version_id"]),
        fact_id=str(row["fact_id"]),
        text=row["text"],
        kind=FactKind(row["kind"]),
        valid_from=row["valid_from"],
        valid_to=row["valid_to"],
        recorded_at=row["recorded_at"],
        superseded_at=row["superseded_at"],
        conversation_id=row["conversation_id"],
        message_id=row["message_id"],
        extractor=row["extractor"],
        standing=row["standing"],
    )


def _uuid(field: str, value: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except ValueError:
        raise InvalidArgument(field, "is not a fact id") from None


@dataclass(frozen=True, slots=True)
class OutboxItem:
    id: int
    scope_hash: str
    op: str  # upsert | delete | purge
    version_id: str
    attempts: int


@dataclass(frozen=True, slots=True)
class VectorSource:
    """A version as the vector index needs it."""

    version_id: str
    scope_hash: str
    text: str
    valid_from: datetime
    valid_to: datetime | None
    recorded_at: datetime
    superseded_at: datetime | None


class OutboxBatch:
    """Claimed outbox rows, locked until the surrounding transaction ends."""

    def __init__(self, conn: asyncpg.Connection, items: list[OutboxItem]) -> None:
        self._conn = conn
        self.items = items

    async def sources(self) -> dict[str, VectorSource]:
        """Current state of the versions to upsert; a version erased meanwhile is absent."""
        ids = [uuid.UUID(i.version_id) for i in self.items if i.op == "upsert"]
        if not ids:
            return {}
        rows = await self._conn.fetch(
            """SELECT v.id, s.scope_hash, v.text, v.valid_from, v.valid_to, v.recorded_at,
                      v.superseded_at
               FROM fact_versions v JOIN scopes s ON s.id = v.scope_id
               WHERE v.id = ANY($1::uuid[])""",
            ids,
        )
        return {
            str(r["id"]): VectorSource(
                str(r["id"]),
                r["scope_hash"],
                r["text"],
                r["valid_from"],
                r["valid_to"],
                r["recorded_at"],
                r["superseded_at"],
            )
            for r in rows
        }

    async def done(self) -> None:
        await self._conn.execute(
            "DELETE FROM vector_outbox WHERE id = ANY($1::bigint[])", [i.id for i in self.items]
        )

    async def retry(self, error: str, delay_s: float) -> None:
        await self._conn.execute(
            """UPDATE vector_outbox SET attempts = attempts + 1, last_error = $2,
                      next_attempt_at = now() + $3::interval
               WHERE id = ANY($1::bigint[])""",
            [i.id for i in self.items],
            error[:500],
            timedelta(seconds=delay_s),
        )


class PostgresFactStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    # --- reads -------------------------------------------------------------------------------

    async def live_facts(self, scope: Scope) -> list[LiveFact]:
        return await _live_facts(self._pool, scope)

    async def versions(
        self, scope: Scope, version_ids: Sequence[str], as_of: AsOf
    ) -> list[FactVersion]:
        """The given versions that belong to the scope and are believed at `as_of`."""
        rows = await self._pool.fetch(
            f"""SELECT {_VERSION_COLUMNS} FROM fact_versions v
                WHERE v.scope_id = {_SCOPE_ID} AND v.id = ANY($3::uuid[])
                  AND {_BELIEVED.format(v="$4::timestamptz", t="$5::timestamptz")}""",
            scope.username,
            scope.graphname,
            [uuid.UUID(i) for i in version_ids],
            as_of.valid_time,
            as_of.transaction_time,
        )
        return [_version(r) for r in rows]

    async def standing(self, scope: Scope, limit: int) -> list[FactVersion]:
        """Live standing instructions, newest first."""
        rows = await self._pool.fetch(
            f"""SELECT {_VERSION_COLUMNS} FROM fact_versions v
                WHERE v.scope_id = {_SCOPE_ID} AND v.standing AND {_LIVE}
                ORDER BY v.recorded_at DESC, v.id LIMIT $3""",
            scope.username,
            scope.graphname,
            limit,
        )
        return [_version(r) for r in rows]

    async def lexical(
        self, scope: Scope, query: str, k: int, as_of: AsOf
    ) -> list[tuple[str, float]]:
        """Versions believed at `as_of` sharing words with the query, with the idf-weighted
        share of the query's distinct stemmed words each contains, in (0, 1].

        A word's weight is its BM25 idf, ln(1 + (N - df + 0.5) / (df + 0.5)), over the N
        versions of the scope believed at `as_of` (df of them contain it): a word most facts
        contain (a speaker's name) says little, a rare one much, and a query word no fact
        contains weighs most, so a fact covering only the common part of a query scores low.
        """
        believed = _BELIEVED.format(v="$5::timestamptz", t="$6::timestamptz")
        rows = await self._pool.fetch(
            f"""
            WITH w AS (SELECT tsvector_to_array(to_tsvector('english', $3)) AS words),
            -- The OR query is built once: inside the row filter PostgreSQL would parse and
            -- stem it again for every row of the scope (to_tsquery is only STABLE).
            q AS MATERIALIZED (
                SELECT words,
                       CASE WHEN cardinality(words) > 0
                            THEN to_tsquery('english', array_to_string(words, ' | ')) END AS tsq
                FROM w
            ),
            matched AS MATERIALIZED (
                SELECT v.id, v.recorded_at,
                       ARRAY(SELECT w FROM unnest(q.words) w
                             WHERE w = ANY(tsvector_to_array(v.lexemes))) AS hits
                FROM fact_versions v, q
                WHERE v.scope_id = {_SCOPE_ID}
                  AND v.lexemes @@ q.tsq
                  AND {believed}
            ),
            n AS (
                SELECT count(*)::float8 AS n FROM fact_versions v
                WHERE v.scope_id = {_SCOPE_ID} AND {believed}
            ),
            idf AS (
                SELECT d.w, ln(1 + (n.n - d.df + 0.5) / (d.df + 0.5)) AS idf
                FROM (SELECT w, (SELECT count(*) FROM matched m WHERE w = ANY(m.hits)) AS df
                      FROM q, unnest(q.words) w) d, n
            ),
            total AS (SELECT sum(idf) AS idf FROM idf)
            SELECT m.id,
                   least(1.0, (SELECT COALESCE(sum(i.idf), 0) FROM idf i WHERE i.w = ANY(m.hits))
                              / total.idf) AS coverage
            FROM matched m, total
            ORDER BY coverage DESC, m.recorded_at DESC
            LIMIT $4
            """,
            scope.username,
            scope.graphname,
            query,
            k,
            as_of.valid_time,
            as_of.transaction_time,
        )
        return [(str(r["id"]), float(r["coverage"])) for r in rows]

    async def list_facts(
        self, scope: Scope, as_of: AsOf, limit: int, offset: int
    ) -> list[FactVersion]:
        rows = await self._pool.fetch(
            f"""SELECT {_VERSION_COLUMNS} FROM fact_versions v
                WHERE v.scope_id = {_SCOPE_ID}
                  AND {_BELIEVED.format(v="$3::timestamptz", t="$4::timestamptz")}
                ORDER BY v.recorded_at DESC, v.id LIMIT $5 OFFSET $6""",
            scope.username,
            scope.graphname,
            as_of.valid_time,
            as_of.transaction_time,
            limit,
            offset,
        )
        return [_version(r) for r in rows]

    async def fact_versions(self, scope: Scope, fact_id: str) -> list[FactVersion]:
        rows = await self._pool.fetch(
            f"""SELECT {_VERSION_COLUMNS} FROM fact_versions v
                WHERE v.scope_id = {_SCOPE_ID} AND v.fact_id = $3
                ORDER BY v.recorded_at, v.valid_from, v.id""",
            scope.username,
            scope.graphname,
            _uuid("fact_id", fact_id),
        )
        if not rows:
            raise NotFound(f"fact_id: no fact {fact_id!r}")
        return [_version(r) for r in rows]

    async def history(self, scope: Scope, fact_id: str) -> list[HistoryEvent]:
        rows = await self._pool.fetch(
            f"""SELECT h.event, h.at, h.version_id, h.conversation_id, h.message_id,
                       h.extractor, h.detail
                FROM fact_history h WHERE h.scope_id = {_SCOPE_ID} AND h.fact_id = $3
                ORDER BY h.id""",
            scope.username,
            scope.graphname,
            _uuid("fact_id", fact_id),
        )
        if not rows:
            raise NotFound(f"fact_id: no fact {fact_id!r}")
        return [
            HistoryEvent(
                r["event"],
                r["at"],
                str(r["version_id"] or ""),
                r["conversation_id"],
                r["message_id"],
                r["extractor"],
                r["detail"],
            )
            for r in rows
        ]

    # --- writes ------------------------------------------------------------------------------

    async def apply(
        self,
        scope: Scope,
        decisions: Sequence[ReconciledCandidate],
        provenance: Provenance,
        *,
        max_live: int,
        ended: bool = True,
        revise: Revise | None = None,
    ) -> list[AppliedChange]:
        """Applies reconciliation decisions in one transaction (versions, history, outbox),
        under the scope's write lock; with `revise`, what it answers for the live facts read
        under the lock is applied instead (see FactStore.apply).

        DELETE closes the version's transaction time and, when `ended` (the fact stopped
        being true) or the candidate announced a change, records that it ended now.
        Past `max_live` live facts, the least recently seen are evicted (closed)."""
        applied: list[AppliedChange] = []
        async with self._pool.acquire() as conn, conn.transaction():
            await lock_scope(conn, scope)
            if revise is not None:
                decisions = revise(await _live_facts(conn, scope))
            scope_id = await conn.fetchval(
                """INSERT INTO scopes (username, graphname, scope_hash) VALUES ($1, $2, $3)
                   ON CONFLICT (username, graphname) DO UPDATE SET username = EXCLUDED.username
                   RETURNING id""",
                scope.username,
                scope.graphname,
                scope.scope_hash,
            )
            w = _Writer(conn, scope_id, scope.scope_hash, provenance)
            for item in decisions:
                candidate = item.candidate
                if item.decision is Decision.ADD:
                    fact_id, version_id = await w.add(candidate)
                    applied.append(AppliedChange(Decision.ADD, fact_id, version_id))
                elif item.decision is Decision.UPDATE:
                    version_id = await w.update(item.target_fact_id, candidate)
                    applied.append(AppliedChange(Decision.UPDATE, item.target_fact_id, version_id))
                elif item.decision is Decision.DELETE:
                    await w.delete(
                        item.target_fact_id, ended=ended or candidate.change, event="DELETE"
                    )
                    applied.append(AppliedChange(Decision.DELETE, item.target_fact_id, ""))
                else:  # NONE: already known (or, without a target, nothing to retract)
                    if item.target_fact_id:
                        await w.confirm(item.target_fact_id)
                    applied.append(AppliedChange(Decision.NONE, item.target_fact_id, ""))
            await w.evict_over(max_live)
        return applied

    async def touch(self, scope: Scope, fact_ids: Sequence[str]) -> None:
        """Recalled into a turn: counts for retention and eviction."""
        if not fact_ids:
            return
        await self._pool.execute(
            f"""UPDATE facts SET last_seen_at = now(), recall_count = recall_count + 1
                WHERE id = ANY($3::uuid[]) AND scope_id = {_SCOPE_ID}""",
            scope.username,
            scope.graphname,
            [uuid.UUID(f) for f in fact_ids],
        )

    async def stale_scopes(self, cutoff: datetime) -> list[Scope]:
        """Scopes holding live facts not stated again or recalled since `cutoff`."""
        rows = await self._pool.fetch(
            f"""SELECT DISTINCT s.username, s.graphname
                FROM facts f JOIN scopes s ON s.id = f.scope_id
                JOIN fact_versions v ON v.fact_id = f.id AND {_LIVE}
                WHERE f.last_seen_at < $1""",
            cutoff,
        )
        return [Scope(r["username"], r["graphname"]) for r in rows]

    async def expire(self, scope: Scope, cutoff: datetime) -> int:
        """Closes (transaction time) the scope's live facts unseen since `cutoff`."""
        async with self._pool.acquire() as conn, conn.transaction():
            # Under the lock the facts chosen here are still live when they are closed, even
            # if another server's retention pass or a turn got to the scope first.
            await lock_scope(conn, scope)
            rows = await conn.fetch(
                f"""SELECT f.id, f.scope_id, s.scope_hash FROM facts f
                    JOIN scopes s ON s.id = f.scope_id
                    JOIN fact_versions v ON v.fact_id = f.id AND {_LIVE}
                    WHERE s.username = $1 AND s.graphname = $2 AND f.last_seen_at < $3""",
                scope.username,
                scope.graphname,
                cutoff,
            )
            for row in rows:
                writer = _Writer(
                    conn, row["scope_id"], row["scope_hash"], Provenance(extractor="retention")
                )
                await writer.delete(str(row["id"]), ended=False, event="EXPIRE")
        return len(rows)

    async def purge_expired(self, cutoff: datetime) -> int:
        """Erases facts that expired before `cutoff` (versions, history, vectors).

        No scope lock: a fact without a live version is past every other write's reach (they
        all start from a live version), so this races with nothing but ForgetScope, and two
        erasures of one row only wait for each other."""
        async with self._pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(
                f"""SELECT f.id FROM facts f
                    WHERE NOT EXISTS (SELECT 1 FROM fact_versions v
                                      WHERE v.fact_id = f.id AND {_LIVE})
                      AND (SELECT h.event FROM fact_history h WHERE h.fact_id = f.id
                           ORDER BY h.id DESC LIMIT 1) = 'EXPIRE'
                      AND (SELECT max(h.at) FROM fact_history h WHERE h.fact_id = f.id)
                          < $1""",
                cutoff,
            )
            ids = [r["id"] for r in rows]
            if not ids:
                return 0
            await conn.execute(
                """INSERT INTO vector_outbox (scope_hash, op, version_id)
                   SELECT s.scope_hash, 'delete', v.id FROM fact_versions v
                   JOIN scopes s ON s.id = v.scope_id WHERE v.fact_id = ANY($1::uuid[])""",
                ids,
            )
            await conn.execute("DELETE FROM fact_history WHERE fact_id = ANY($1::uuid[])", ids)
            await conn.execute("DELETE FROM facts WHERE id = ANY($1::uuid[])", ids)
        return len(ids)

    async def forget_scope(self, scope: Scope, *, include_messages: bool) -> dict[str, int]:
        """Erasure: removes facts, versions, history and outbox rows of the scope (and its
        conversations, messages and summaries if asked), and queues a purge of its vectors."""
        async with self._pool.acquire() as conn, conn.transaction():
            # Any write of the scope on another server is then wholly before the erasure or
            # wholly after it (and starts the scope afresh).
            await lock_scope(conn, scope)
            scope_id = await conn.fetchval(
                "SELECT id FROM scopes WHERE username = $1 AND graphname = $2 FOR UPDATE",
                scope.username,
                scope.graphname,
            )
            if scope_id is None:
                return {"facts": 0, "versions": 0, "messages": 0}
            versions = await conn.fetchval(
                "SELECT count(*) FROM fact_versions WHERE scope_id = $1", scope_id
            )
            facts = await conn.execute("DELETE FROM facts WHERE scope_id = $1", scope_id)
            await conn.execute("DELETE FROM fact_history WHERE scope_id = $1", scope_id)
            await conn.execute("DELETE FROM vector_outbox WHERE scope_hash = $1", scope.scope_hash)
            await conn.execute(
                "INSERT INTO vector_outbox (scope_hash, op) VALUES ($1, 'purge')",
                scope.scope_hash,
            )
            messages = 0
            if include_messages:
                messages = await conn.fetchval(
                    "SELECT count(*) FROM messages WHERE scope_id = $1", scope_id
                )
                await conn.execute("DELETE FROM scopes WHERE id = $1", scope_id)
        return {"facts": _count(facts), "versions": int(versions), "messages": int(messages)}

    # --- outbox ------------------------------------------------------------------------------

    @asynccontextmanager
    async def claim_outbox(self, limit: int) -> AsyncIterator[OutboxBatch]:
        """Claims due outbox rows for the duration of the block (FOR UPDATE SKIP LOCKED).

        A row whose version has an older row this claim did not get (another server is sending
        it, or it waits for a retry) is left for later: the index must see a version's changes
        in order, or a server still sending the version as it was could overwrite, say, its
        closing sent meanwhile by another."""
        async with self._pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(
                """WITH claimed AS (
                       SELECT id, scope_hash, op, version_id, attempts FROM vector_outbox
                       WHERE next_attempt_at <= now() ORDER BY id LIMIT $1
                       FOR UPDATE SKIP LOCKED)
                   SELECT c.* FROM claimed c
                   WHERE c.version_id IS NULL OR NOT EXISTS (
                       SELECT 1 FROM vector_outbox o
                       WHERE o.version_id = c.version_id AND o.id < c.id
                         AND o.id NOT IN (SELECT id FROM claimed))
                   ORDER BY c.id""",
                limit,
            )
            yield OutboxBatch(
                conn,
                [
                    OutboxItem(
                        r["id"], r["scope_hash"], r["op"], str(r["version_id"] or ""), r["attempts"]
                    )
                    for r in rows
                ],
            )

    async def outbox_status(self) -> tuple[int, float]:
        """(pending rows, age in seconds of the oldest)."""
        row = await self._pool.fetchrow(
            """SELECT count(*) AS pending,
                      COALESCE(extract(epoch FROM now() - min(created_at)), 0) AS lag
               FROM vector_outbox"""
        )
        return int(row["pending"]), float(row["lag"])

    async def check_embedding_model(self, model_name: str, dimension: int) -> None:
        """Records the model on first use; a different one later is an error."""
        row = await self._pool.fetchrow(
            """WITH ins AS (
                   INSERT INTO embedding_model (model_name, dimension) VALUES ($1, $2)
                   ON CONFLICT DO NOTHING RETURNING model_name, dimension)
               SELECT model_name, dimension FROM ins
               UNION ALL SELECT model_name, dimension FROM embedding_model LIMIT 1""",
            model_name,
            dimension,
        )
        if row is None:
            # Another server recorded it at the same moment: the INSERT waited for its commit,
            # but this statement's snapshot is older. The next statement sees that row.
            row = await self._pool.fetchrow("SELECT model_name, dimension FROM embedding_model")
        if (row["model_name"], row["dimension"]) != (model_name, dimension):
            raise EmbeddingModelMismatch(
                f"the stored vectors were made with {row['model_name']} "
                f"({row['dimension']} dimensions), not {model_name} ({dimension}); "
                "run `python -m memory_server.admin reembed` with the new model's settings, "
                "or configure the original model"
            )


class EmbeddingModelMismatch(RuntimeError):
    pass


def _count(status: str) -> int:
    return int(status.rsplit(" ", 1)[-1])


class _Writer:
    """The statements of one `apply` transaction. All times are the transaction's now()."""

    def __init__(
        self, conn: asyncpg.Connection, scope_id: int, scope_hash: str, provenance: Provenance
    ) -> None:
        self._conn = conn
        self._scope_id = scope_id
        self._scope_hash = scope_hash
        self._p = provenance

    async def _history(
        self, fact_id: str, version_id: str | None, event: str, detail: str = ""
    ) -> None:
        await self._conn.execute(
            """INSERT INTO fact_history (scope_id, fact_id, version_id, event, at,
                                         conversation_id, message_id, extractor, detail)
               VALUES ($1, $2, $3, $4, now(), $5, $6, $7, $8)""",
            self._scope_id,
            uuid.UUID(fact_id),
            uuid.UUID(version_id) if version_id else None,
            event,
            self._p.conversation_id,
            self._p.message_id,
            self._p.extractor,
            detail,
        )

    async def _outbox(self, version_ids: Sequence[str]) -> None:
        await self._conn.executemany(
            "INSERT INTO vector_outbox (scope_hash, op, version_id) VALUES ($1, 'upsert', $2)",
            [(self._scope_hash, uuid.UUID(v)) for v in version_ids],
        )

    async def _insert_version(self, fact_id: str, candidate: Candidate) -> str:
        """A new live version, valid and recorded from now."""
        version_id = str(uuid.uuid4())
        await self._conn.execute(
            """INSERT INTO fact_versions (id, fact_id, scope_id, text, kind, valid_from,
                                          recorded_at, conversation_id, message_id, extractor,
                                          standing)
               VALUES ($1, $2, $3, $4, $5, now(), now(), $6, $7, $8, $9)""",
            uuid.UUID(version_id),
            uuid.UUID(fact_id),
            self._scope_id,
            candidate.text,
            candidate.kind.value,
            self._p.conversation_id,
            self._p.message_id,
            self._p.extractor,
            candidate.standing,
        )
        return version_id

    async def _close_live(self, fact_id: str) -> asyncpg.Record:
        row = await self._conn.fetchrow(
            f"""UPDATE fact_versions v SET superseded_at = now()
                WHERE v.fact_id = $1 AND v.scope_id = $2 AND {_LIVE}
                RETURNING v.id, v.text, v.kind, v.valid_from, v.conversation_id,
                          v.message_id, v.extractor, v.standing""",
            _uuid("fact_id", fact_id),
            self._scope_id,
        )
        if row is None:
            raise NotFound(f"fact_id: no live fact {fact_id!r}")
        return row

    async def add(self, candidate: Candidate) -> tuple[str, str]:
        fact_id = str(uuid.uuid4())
        await self._conn.execute(
            "INSERT INTO facts (id, scope_id, kind) VALUES ($1, $2, $3)",
            uuid.UUID(fact_id),
            self._scope_id,
            candidate.kind.value,
        )
        version_id = await self._insert_version(fact_id, candidate)
        await self._history(fact_id, version_id, "ADD")
        await self._outbox([version_id])
        return fact_id, version_id

    async def _insert_ended_copy(self, fact_id: str, closed: asyncpg.Record) -> str:
        """Records, as of now, that the closed version was true until now (valid_to)."""
        version_id = str(uuid.uuid4())
        await self._conn.execute(
            """INSERT INTO fact_versions (id, fact_id, scope_id, text, kind, valid_from,
                                          valid_to, recorded_at, conversation_id, message_id,
                                          extractor, standing)
               VALUES ($1, $2, $3, $4, $5, $6, now(), now(), $7, $8, $9, $10)""",
            uuid.UUID(version_id),
            uuid.UUID(fact_id),
            self._scope_id,
            closed["text"],
            closed["kind"],
            closed["valid_from"],
            closed["conversation_id"],
            closed["message_id"],
            closed["extractor"],
            closed["standing"],
        )
        return version_id

    async def update(self, fact_id: str, candidate: Candidate) -> str:
        closed = await self._close_live(fact_id)
        ended_copy = await self._insert_ended_copy(fact_id, closed)
        version_id = await self._insert_version(fact_id, candidate)
        await self._conn.execute(
            "UPDATE facts SET kind = $2, last_seen_at = now() WHERE id = $1",
            uuid.UUID(fact_id),
            candidate.kind.value,
        )
        await self._history(fact_id, version_id, "UPDATE", f"supersedes {closed['id']}")
        await self._outbox([str(closed["id"]), ended_copy, version_id])
        return version_id

    async def delete(self, fact_id: str, *, ended: bool, event: str) -> None:
        closed = await self._close_live(fact_id)
        changed = [str(closed["id"])]
        if ended:
            changed.append(await self._insert_ended_copy(fact_id, closed))
        await self._history(fact_id, str(closed["id"]), event, "ended" if ended else "retracted")
        await self._outbox(changed)

    async def confirm(self, fact_id: str) -> None:
        await self._conn.execute(
            "UPDATE facts SET last_seen_at = now() WHERE id = $1 AND scope_id = $2",
            _uuid("fact_id", fact_id),
            self._scope_id,
        )

    async def evict_over(self, max_live: int) -> None:
        rows = await self._conn.fetch(
            f"""SELECT v.fact_id FROM fact_versions v JOIN facts f ON f.id = v.fact_id
                WHERE v.scope_id = $1 AND {_LIVE}
                ORDER BY f.last_seen_at DESC, f.recall_count DESC, v.recorded_at DESC
                OFFSET $2""",
            self._scope_id,
            max_live,
        )
        for row in rows:
            await self.delete(str(row["fact_id"]), ended=False, event="EVICT")
