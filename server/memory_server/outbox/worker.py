"""The outbox actor: claims committed fact changes from PostgreSQL and applies them to the
vector index in batches.

Rows are claimed with FOR UPDATE SKIP LOCKED, so several servers can share the outbox; a
batch is deleted in the same transaction after the index accepted it, or pushed back with
exponential back-off if the index (or the embedder) failed. Upserts read the version's
current state when they are sent, so replays are idempotent and a version erased meanwhile
simply leaves the index. A crash at any point leaves the rows pending: they are sent again.

Batches are pipelined: while one batch links and writes (the model idle), the next one is
claimed and embedded (`batches_in_flight`, 2 by default). Each batch still applies to the index
only after the one claimed before it has finished, so the index sees batches in claim order and
a batch's links see the vectors of every batch before it, as when they ran one at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Sequence

from memory_server.lifecycle import Lifecycle
from memory_server.memory.errors import Unavailable
from memory_server.memory.ports import Embedder, LinkRecord, VectorIndex, VectorRecord
from memory_server.outbox.links import Indexed, LinkSettings, choose_links
from memory_server.store.facts import (
    OutboxBatch,
    OutboxItem,
    PostgresFactStore,
    VectorSource,
)

log = logging.getLogger(__name__)


class OutboxWorker(Lifecycle):
    def __init__(
        self,
        store: PostgresFactStore,
        index: VectorIndex,
        embedder: Embedder,
        *,
        batch_size: int = 256,
        poll_interval_s: float = 1.0,
        max_backoff_s: float = 60.0,
        linger_s: float = 0.5,
        links: LinkSettings | None = None,
        batches_in_flight: int = 2,
    ) -> None:
        if batches_in_flight < 1:
            raise ValueError("batches_in_flight must be at least 1")
        self._in_flight = batches_in_flight
        self._links = links or LinkSettings()
        self._store = store
        self._index = index
        self._embedder = embedder
        self._batch_size = batch_size
        self._poll_interval_s = poll_interval_s
        self._max_backoff_s = max_backoff_s
        self._linger_s = linger_s
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self.sent = 0  # outbox rows applied to the index
        self.failures = 0  # batches pushed back
        self.links_written = 0  # links recorded (a replayed batch counts its links again)

    async def start(self) -> None:
        if self._task is None and not self._closing:
            self._task = asyncio.create_task(self._run(), name="outbox")

    async def status(self) -> tuple[int, float]:
        """(rows waiting, seconds the oldest has waited): the index's lag behind PostgreSQL."""
        return await self._store.outbox_status()

    def notify(self) -> None:
        """New rows were committed: look now instead of at the next poll."""
        self._wake.set()

    async def close(self, timeout_s: float = 10.0) -> None:
        """One last drain (bounded by the timeout), then stop. Idempotent, safe before start."""
        if self._closing:
            return
        self._closing = True
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        try:
            await asyncio.wait_for(self.drain(), timeout_s)
        except (TimeoutError, Exception):
            log.warning("outbox not drained at shutdown; rows stay pending for the next start")

    async def _run(self) -> None:
        while True:
            self._wake.clear()  # before draining: a notify during the drain is not lost
            try:
                await self.drain()
            except Unavailable as exc:
                # The rows stay pending; the next pass sends them.
                log.warning("outbox pass skipped: %s", exc)
            except Exception:
                log.exception("outbox pass failed")
            woken = False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._poll_interval_s)
                woken = True
            if woken:
                # Flush on size or time: changes arriving one by one (a turn each) are sent
                # together, so the index sees few large requests rather than many small ones.
                await asyncio.sleep(self._linger_s)

    async def drain(self) -> int:
        """Send batches until nothing is due; returns the rows applied.

        A short batch claimed alone means the backlog is done. One claimed beside another
        may be short only because rows were passed over for the batch ahead (a version's
        changes go in order), so after it one more batch is claimed alone, once the others
        are done."""
        total = 0
        more = True  # no batch claimed alone has come back short
        alone_next = False  # start nothing until the batches in flight are done
        in_flight: deque[tuple[bool, asyncio.Task[int]]] = deque()
        try:
            while True:
                while more and len(in_flight) < self._in_flight:
                    if alone_next and in_flight:
                        break
                    alone_next = False
                    ahead = in_flight[-1][1] if in_flight else None
                    claimed = asyncio.get_running_loop().create_future()
                    task = asyncio.ensure_future(self.send_one_batch(ahead, claimed))
                    in_flight.append((ahead is None, task))
                    # The next claim only after this one's, so that claim order is send order.
                    await asyncio.wait([claimed, task], return_when=asyncio.FIRST_COMPLETED)
                if not in_flight:
                    return total
                alone, task = in_flight.popleft()
                applied = await task
                total += applied
                if applied < self._batch_size:
                    if alone:
                        more = False  # the ones still in flight finish, no new ones start
                    else:
                        alone_next = True
        finally:
            for _, task in in_flight:
                task.cancel()
            await asyncio.gather(*(task for _, task in in_flight), return_exceptions=True)

    async def send_one_batch(
        self,
        after: asyncio.Future[int] | None = None,
        claimed: asyncio.Future[None] | None = None,
    ) -> int:
        """Claims and embeds one batch, then applies it once `after` (the batch claimed
        before it) has finished; returns the rows applied (0 when pushed back). `claimed` is
        resolved as soon as the rows are claimed."""
        async with self._store.claim_outbox(self._batch_size) as batch:
            if claimed is not None:
                claimed.set_result(None)
            if not batch.items:
                return 0
            try:
                sources = await batch.sources()
                vectors = await self._embed(batch.items, sources)
                if after is not None:
                    await asyncio.wait([after])  # its outcome is its own: it handles failure
                await self._apply(batch, sources, vectors)
            except Exception as exc:
                attempts = max(i.attempts for i in batch.items) + 1
                delay = min(self._max_backoff_s, 0.5 * 2 ** min(attempts, 16))
                self.failures += 1
                log.warning(
                    "vector index batch of %d failed (attempt %d, retry in %.1fs): %s",
                    len(batch.items),
                    attempts,
                    delay,
                    type(exc).__name__,
                )
                await batch.retry(type(exc).__name__, delay)
                return 0
            await batch.done()
        self.sent += len(batch.items)
        return len(batch.items)

    async def _embed(
        self, items: Sequence[OutboxItem], sources: dict[str, VectorSource]
    ) -> dict[str, list[float]]:
        """The vectors of the versions the batch upserts, in one call to the embedder."""
        upserted = dict.fromkeys(
            i.version_id for i in items if i.op == "upsert" and i.version_id in sources
        )
        if not upserted:
            return {}
        vectors = await self._embedder.embed([sources[v].text for v in upserted])
        return dict(zip(upserted, vectors, strict=True))

    async def _apply(
        self,
        batch: OutboxBatch,
        sources: dict[str, VectorSource],
        vectors: dict[str, list[float]],
    ) -> None:
        # A purge must not overtake what was queued before it, nor erase what came after:
        # send the batch in segments split at each purge.
        segment: list[OutboxItem] = []
        for item in batch.items:
            if item.op == "purge":
                await self._send(batch, segment, sources, vectors)
                segment = []
                await self._index.purge_scope(item.scope_hash)
            else:
                segment.append(item)
        await self._send(batch, segment, sources, vectors)

    async def _send(
        self,
        batch: OutboxBatch,
        items: Sequence[OutboxItem],
        sources: dict[str, VectorSource],
        vectors: dict[str, list[float]],
    ) -> None:
        upserts: dict[str, VectorSource] = {}
        deletes: set[str] = set()
        for item in items:
            source = sources.get(item.version_id)
            if item.op == "upsert" and source is not None:
                upserts[item.version_id] = source
                deletes.discard(item.version_id)
            else:  # a delete, or an upsert of a version erased since
                deletes.add(item.version_id)
                upserts.pop(item.version_id, None)
        if upserts:
            ordered = list(upserts.values())
            embedded = [vectors[s.version_id] for s in ordered]
            links = await self._link(batch, ordered, embedded)
            await self._index.upsert(
                [
                    VectorRecord(
                        s.version_id,
                        s.scope_hash,
                        v,
                        s.valid_from,
                        s.valid_to,
                        s.recorded_at,
                        s.superseded_at,
                    )
                    for s, v in zip(ordered, embedded, strict=True)
                ],
                links,
            )
        if deletes:
            await self._index.delete(sorted(deletes))

    async def _link(
        self, batch: OutboxBatch, sources: Sequence[VectorSource], vectors: list[list[float]]
    ) -> list[LinkRecord]:
        """Links the batch's live versions to their most similar live facts and closes the
        links of its closed ones, in the claim transaction (so they commit with the batch);
        returns both, for an index that mirrors links as edges in the same request."""
        live = [
            Indexed(s.version_id, s.scope_hash, v)
            for s, v in zip(sources, vectors, strict=True)
            if s.superseded_at is None and s.valid_to is None
        ]
        pairs = await choose_links(self._index, live, self._links)
        written = await batch.record_links(pairs)
        self.links_written += len(written)
        closed = await batch.close_links(
            [s.version_id for s in sources if s.superseded_at is not None]
        )
        return [*written, *closed]
