"""The statements of one fact change, inside its transaction: new versions, closed versions,
their history rows and their outbox rows, all stamped with the transaction's now()."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

import asyncpg

from memory_server.memory.errors import NotFound
from memory_server.memory.facts.model import Candidate, Provenance
from memory_server.store.facts._sql import LIVE, fact_uuid


class ChangeTransaction:
    """The statements of one `apply` (or retention) transaction on one scope."""

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
        """A new live version, recorded from now and valid from when it was said (the
        candidate's `said_at`; now when it has none), with the date its text speaks of."""
        version_id = str(uuid.uuid4())
        event = candidate.event
        await self._conn.execute(
            """INSERT INTO fact_versions (id, fact_id, scope_id, text, kind, valid_from,
                                          recorded_at, conversation_id, message_id, extractor,
                                          standing, event_at, event_period)
               VALUES ($1, $2, $3, $4, $5, COALESCE($10::timestamptz, now()), now(), $6, $7,
                       $8, $9, $11, $12)""",
            uuid.UUID(version_id),
            uuid.UUID(fact_id),
            self._scope_id,
            candidate.text,
            candidate.kind.value,
            self._p.conversation_id,
            self._p.message_id,
            self._p.extractor,
            candidate.standing,
            candidate.said_at,
            event.at if event else None,
            event.period.value if event else "",
        )
        return version_id

    async def _close_live(self, fact_id: str) -> asyncpg.Record:
        row = await self._conn.fetchrow(
            f"""UPDATE fact_versions v SET superseded_at = now()
                WHERE v.fact_id = $1 AND v.scope_id = $2 AND {LIVE}
                RETURNING v.id, v.text, v.kind, v.valid_from, v.conversation_id,
                          v.message_id, v.extractor, v.standing, v.event_at, v.event_period""",
            fact_uuid("fact_id", fact_id),
            self._scope_id,
        )
        if row is None:
            raise NotFound(f"fact_id: no live fact {fact_id!r}")
        return row

    async def add(self, candidate: Candidate) -> tuple[str, str]:
        fact_id = str(uuid.uuid4())
        await self._conn.execute(
            # clock_timestamp(), not now(): facts written by one transaction (a batch of
            # AddFacts) are seen in the order they were written, and evicted in that order.
            """INSERT INTO facts (id, scope_id, kind, last_seen_at)
               VALUES ($1, $2, $3, clock_timestamp())""",
            uuid.UUID(fact_id),
            self._scope_id,
            candidate.kind.value,
        )
        version_id = await self._insert_version(fact_id, candidate)
        await self._history(fact_id, version_id, "ADD")
        await self._outbox([version_id])
        return fact_id, version_id

    async def _insert_ended_copy(
        self, fact_id: str, closed: asyncpg.Record, until: datetime | None
    ) -> str:
        """Records, as of now, that the closed version was true until `until` (when the
        change was said; now when None), never before it became true."""
        version_id = str(uuid.uuid4())
        await self._conn.execute(
            """INSERT INTO fact_versions (id, fact_id, scope_id, text, kind, valid_from,
                                          valid_to, recorded_at, conversation_id, message_id,
                                          extractor, standing, event_at, event_period)
               VALUES ($1, $2, $3, $4, $5, $6, GREATEST($6, COALESCE($11::timestamptz, now())),
                       now(), $7, $8, $9, $10, $12, $13)""",
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
            until,
            closed["event_at"],
            closed["event_period"],
        )
        return version_id

    async def update(self, fact_id: str, candidate: Candidate) -> str:
        closed = await self._close_live(fact_id)
        ended_copy = await self._insert_ended_copy(fact_id, closed, candidate.said_at)
        version_id = await self._insert_version(fact_id, candidate)
        await self._conn.execute(
            """UPDATE facts SET kind = $2, last_seen_at = clock_timestamp()
               WHERE id = $1 AND scope_id = $3""",
            uuid.UUID(fact_id),
            candidate.kind.value,
            self._scope_id,
        )
        await self._history(fact_id, version_id, "UPDATE", f"supersedes {closed['id']}")
        await self._outbox([str(closed["id"]), ended_copy, version_id])
        return version_id

    async def delete(
        self, fact_id: str, *, ended: bool, event: str, at: datetime | None = None
    ) -> None:
        """Closes the live version; when `ended`, records that it was true until `at` (when
        that was said; now when None)."""
        closed = await self._close_live(fact_id)
        changed = [str(closed["id"])]
        if ended:
            changed.append(await self._insert_ended_copy(fact_id, closed, at))
        await self._history(fact_id, str(closed["id"]), event, "ended" if ended else "retracted")
        await self._outbox(changed)

    async def confirm(self, fact_id: str) -> None:
        await self._conn.execute(
            "UPDATE facts SET last_seen_at = clock_timestamp() WHERE id = $1 AND scope_id = $2",
            fact_uuid("fact_id", fact_id),
            self._scope_id,
        )

    async def evict_over(self, max_live: int) -> None:
        """Deletes (EVICT) the least recently seen live facts over `max_live`. Most writes
        leave the scope within it: then one look at the scope's live index, stopping after
        `max_live` entries, is all this costs (sorting every live fact was once the most
        expensive statement of AddFact: bench/README.md, "Figures behind the code")."""
        over = await self._conn.fetchval(
            f"""SELECT 1 FROM fact_versions v WHERE v.scope_id = $1 AND {LIVE}
                OFFSET $2 LIMIT 1""",
            self._scope_id,
            max_live,
        )
        if over is None:
            return
        rows = await self._conn.fetch(
            f"""SELECT v.fact_id FROM fact_versions v JOIN facts f ON f.id = v.fact_id
                WHERE v.scope_id = $1 AND {LIVE}
                ORDER BY f.last_seen_at DESC, f.recall_count DESC, v.recorded_at DESC
                OFFSET $2""",
            self._scope_id,
            max_live,
        )
        for row in rows:
            await self.delete(str(row["fact_id"]), ended=False, event="EVICT")
