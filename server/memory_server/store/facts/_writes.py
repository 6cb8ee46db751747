"""Changing facts: applying reconciliation decisions, recall bookkeeping, retention (expiry and
purge) and erasure of a scope. Each change is one transaction that writes its versions, history
and outbox rows together, under the scope's write lock where it starts from live versions."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime

import asyncpg

from memory_server.memory.facts.model import (
    AppliedChange,
    Decision,
    LiveFact,
    Provenance,
    ReconciledCandidate,
)
from memory_server.memory.identity import Scope
from memory_server.memory.ports import Applying, Revise
from memory_server.memory.recall.seen import Seen
from memory_server.store.facts._sql import LIVE, OnPool, live_facts
from memory_server.store.facts._transaction import ChangeTransaction
from memory_server.store.scope_lock import lock_scope


class FactWrites(OnPool):
    async def apply(
        self,
        scope: Scope,
        decisions: Sequence[ReconciledCandidate],
        provenance: Provenance,
        *,
        max_live: int,
        ended: bool = True,
        revise: Revise | None = None,
        timeout_s: float | None = None,
    ) -> list[AppliedChange]:
        """One change: `apply_batch` of it alone.

        DELETE closes the version's transaction time and, when `ended` (the fact stopped
        being true) or the candidate announced a change, records that it ended now.
        Past `max_live` live facts, the least recently seen are evicted (closed)."""
        change = Applying(decisions, provenance, revise)
        [applied] = await self.apply_batch(
            scope, [change], max_live=max_live, ended=ended, timeout_s=timeout_s
        )
        return applied

    async def apply_batch(
        self,
        scope: Scope,
        changes: Sequence[Applying],
        *,
        max_live: int,
        ended: bool = True,
        timeout_s: float | None = None,
    ) -> list[list[AppliedChange]]:
        """`apply` for each change in turn in one transaction (see FactStore.apply_batch).
        The live facts are read once: the facts a change adds are appended to what the next
        change's `revise` sees, and only a change that updates, deletes or evicts reads them
        again. Past `timeout_s` the transaction is rolled back: nothing is written."""
        async with asyncio.timeout(timeout_s):
            return await self._apply_batch(scope, changes, max_live, ended)

    async def _apply_batch(
        self, scope: Scope, changes: Sequence[Applying], max_live: int, ended: bool
    ) -> list[list[AppliedChange]]:
        out: list[list[AppliedChange]] = []
        async with self._pool.acquire() as conn, conn.transaction():
            await lock_scope(conn, scope)
            live = await live_facts(conn, scope) if any(c.revise for c in changes) else None
            scope_id = await _scope_id(conn, scope)
            for change in changes:
                decisions = change.decisions
                if change.revise is not None and live is not None:
                    decisions = change.revise(live)
                w = ChangeTransaction(conn, scope_id, scope.scope_hash, change.provenance)
                applied = await _write(w, decisions, ended)
                out.append(applied)
                if live is None:
                    await w.evict_over(max_live)
                    continue
                live.extend(
                    LiveFact(a.fact_id, a.version_id, d.candidate.text, d.candidate.kind)
                    for d, a in zip(decisions, applied, strict=True)
                    if a.decision is Decision.ADD
                )
                changed = any(a.decision in _CHANGING for a in applied)
                if changed or len(live) > max_live:
                    await w.evict_over(max_live)
                    live = await live_facts(conn, scope)
        return out

    async def record_seen(self, seen: Mapping[str, Seen]) -> None:
        """Recall's counts (memory.recall.seen), one statement per flush: each fact's recall_count
        grows by its count and its last_seen_at moves forward, never back, so flushes from
        several servers add up in any order. Rows are locked in id order, so two servers'
        flushes over the same facts wait for each other instead of deadlocking."""
        if not seen:
            return
        ids = sorted(seen)
        await self._pool.execute(
            """WITH u AS (SELECT * FROM unnest($1::uuid[], $2::int[], $3::timestamptz[])
                          AS u(id, n, at)),
                    locked AS (SELECT f.id FROM facts f JOIN u ON u.id = f.id
                               ORDER BY f.id FOR UPDATE OF f)
               UPDATE facts f
               SET recall_count = f.recall_count + u.n,
                   last_seen_at = greatest(f.last_seen_at, u.at)
               FROM u JOIN locked l ON l.id = u.id
               WHERE f.id = u.id""",
            [uuid.UUID(i) for i in ids],
            [seen[i].count for i in ids],
            [seen[i].at for i in ids],
        )

    async def stale_scopes(self, cutoff: datetime) -> list[Scope]:
        """Scopes holding live facts not stated again or recalled since `cutoff`."""
        rows = await self._pool.fetch(
            f"""SELECT DISTINCT s.username, s.graphname
                FROM facts f JOIN scopes s ON s.id = f.scope_id
                JOIN fact_versions v ON v.fact_id = f.id AND {LIVE}
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
                    JOIN fact_versions v ON v.fact_id = f.id AND {LIVE}
                    WHERE s.username = $1 AND s.graphname = $2 AND f.last_seen_at < $3""",
                scope.username,
                scope.graphname,
                cutoff,
            )
            for row in rows:
                writer = ChangeTransaction(
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
                                      WHERE v.fact_id = f.id AND {LIVE})
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

    async def forget_scope(
        self, scope: Scope, *, include_messages: bool, timeout_s: float | None = None
    ) -> dict[str, int]:
        """Erasure: removes facts, versions, history and outbox rows of the scope (and its
        conversations, messages and summaries if asked), and queues a purge of its vectors.
        Past `timeout_s` the transaction is rolled back: nothing is erased."""
        async with asyncio.timeout(timeout_s):
            return await self._forget_scope(scope, include_messages)

    async def _forget_scope(self, scope: Scope, include_messages: bool) -> dict[str, int]:
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
            if not include_messages:
                # The purge row erases the scope's episodes too: messages kept for the
                # history are no longer recalled (migration 0010).
                await conn.execute(
                    "UPDATE messages SET recallable = false WHERE scope_id = $1 AND recallable",
                    scope_id,
                )
            else:
                messages = await conn.fetchval(
                    "SELECT count(*) FROM messages WHERE scope_id = $1", scope_id
                )
                await conn.execute("DELETE FROM scopes WHERE id = $1", scope_id)
        return {"facts": _count(facts), "versions": int(versions), "messages": int(messages)}


_CHANGING = (Decision.UPDATE, Decision.DELETE)


async def _write(
    w: ChangeTransaction, decisions: Sequence[ReconciledCandidate], ended: bool
) -> list[AppliedChange]:
    applied: list[AppliedChange] = []
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
                item.target_fact_id,
                ended=ended or candidate.change,
                event="DELETE",
                at=candidate.said_at,
            )
            applied.append(AppliedChange(Decision.DELETE, item.target_fact_id, ""))
        else:  # NONE: already known (or, without a target, nothing to retract)
            if item.target_fact_id:
                await w.confirm(item.target_fact_id)
            applied.append(AppliedChange(Decision.NONE, item.target_fact_id, ""))
    return applied


def _count(status: str) -> int:
    return int(status.rsplit(" ", 1)[-1])


_FIND_OR_CREATE_SCOPE = """
WITH found AS (SELECT id FROM scopes WHERE username = $1 AND graphname = $2),
created AS (
    INSERT INTO scopes (username, graphname, scope_hash)
    SELECT $1, $2, $3 WHERE NOT EXISTS (SELECT 1 FROM found)
    ON CONFLICT DO NOTHING
    RETURNING id
)
SELECT id FROM found UNION ALL SELECT id FROM created
"""


async def _scope_id(conn: asyncpg.Connection, scope: Scope) -> int:
    """The scope's row id, created on first use, without locking an existing row. An upsert
    (`ON CONFLICT DO UPDATE`) takes a row lock that waits for every open transaction holding
    a foreign-key share lock on the scope, such as the outbox's claim transaction while it
    writes fact_links: every write of the scope, and the pool, would wait for the batch."""
    found = await conn.fetchval(
        _FIND_OR_CREATE_SCOPE, scope.username, scope.graphname, scope.scope_hash
    )
    if found is None:  # created by a concurrent transaction after this statement's snapshot
        found = await conn.fetchval(
            "SELECT id FROM scopes WHERE username = $1 AND graphname = $2",
            scope.username,
            scope.graphname,
        )
    return int(found)
