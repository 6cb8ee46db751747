"""The outbox actor: claims committed fact changes from PostgreSQL and applies them to the
vector index in batches.

Rows are claimed with FOR UPDATE SKIP LOCKED, so several servers can share the outbox; a
batch is deleted in the same transaction after the index accepted it, or pushed back with
exponential back-off if the index (or the embedder) failed. Upserts read the version's
current state when they are sent, so replays are idempotent and a version erased meanwhile
simply leaves the index. A crash at any point leaves the rows pending: they are sent again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence

from memory_server.lifecycle import Lifecycle
from memory_server.memory.errors import Unavailable
from memory_server.memory.identity import episode_partition
from memory_server.memory.ports import (
    Embedder,
    LinkRecord,
    SecretFilter,
    VectorIndex,
    VectorRecord,
)
from memory_server.outbox.links import Indexed, LinkSettings, choose_links
from memory_server.outbox.port import Backlog, OutboxBatch, OutboxItem, OutboxRows, VectorSource

log = logging.getLogger(__name__)


class OutboxWorker(Lifecycle):
    def __init__(
        self,
        store: OutboxRows,
        index: VectorIndex,
        embedder: Embedder,
        *,
        batch_size: int = 256,
        poll_interval_s: float = 1.0,
        max_backoff_s: float = 60.0,
        linger_s: float = 0.5,
        links: LinkSettings | None = None,
        redactor: SecretFilter | None = None,
    ) -> None:
        self._links = links or LinkSettings()
        # Where messages are stored verbatim (`redact_secrets` off), an episode's text is
        # redacted here before it is embedded: no secret reaches a vector either way.
        self._redactor = redactor
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

    async def start(self) -> None:
        if self._task is None and not self._closing:
            self._task = asyncio.create_task(self._run(), name="outbox")

    async def backlog(self) -> Backlog:
        """The index's lag behind PostgreSQL."""
        return await self._store.backlog()

    def facts_changed(self) -> None:
        """New rows were committed: look now instead of at the next poll (IndexOutbox)."""
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
        """Send batches until nothing is due; returns the rows applied."""
        total = 0
        while True:
            applied = await self.send_one_batch()
            total += applied
            if applied < self._batch_size:
                return total

    async def send_one_batch(self) -> int:
        async with self._store.claim_outbox(self._batch_size) as batch:
            if not batch.items:
                return 0
            try:
                await self._apply(batch)
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

    async def _apply(self, batch: OutboxBatch) -> None:
        sources = await batch.sources()
        # A purge must not overtake what was queued before it, nor erase what came after:
        # send the batch in segments split at each purge.
        segment: list[OutboxItem] = []
        for item in batch.items:
            if item.op == "purge":
                await self._send(batch, segment, sources)
                segment = []
                # ForgetScope: the scope's facts and its episodes (whose messages were erased
                # or are no longer recallable).
                await self._index.purge_scope(item.scope_hash)
                await self._index.purge_scope(episode_partition(item.scope_hash))
            else:
                segment.append(item)
        await self._send(batch, segment, sources)

    async def _send(
        self,
        batch: OutboxBatch,
        items: Sequence[OutboxItem],
        sources: dict[str, VectorSource],
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
            vectors = await self._vectors(ordered)
            links = await self._link(batch, ordered, vectors)
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
                    for s, v in zip(ordered, vectors, strict=True)
                ],
                links,
            )
        if deletes:
            await self._index.delete(sorted(deletes))

    async def _vectors(self, sources: Sequence[VectorSource]) -> list[list[float]]:
        """The sources' vectors in one request. The server hands the outbox the pool's
        background lane (EmbeddingPool.background): a turn's question goes before an
        imported history's episodes."""
        return await self._embedder.embed(await self._texts(sources))

    async def _texts(self, sources: Sequence[VectorSource]) -> list[str]:
        redactor = self._redactor
        if redactor is None or not any(s.episode for s in sources):
            return [s.text for s in sources]
        return await asyncio.to_thread(
            lambda: [redactor.redact(s.text).text if s.episode else s.text for s in sources]
        )

    async def _link(
        self, batch: OutboxBatch, sources: Sequence[VectorSource], vectors: list[list[float]]
    ) -> list[LinkRecord]:
        """Links the batch's live versions to their most similar live facts and closes the
        links of its closed ones, in the claim transaction (so they commit with the batch);
        returns both, for an index that mirrors links as edges in the same request."""
        live = [
            Indexed(s.version_id, s.scope_hash, v)
            for s, v in zip(sources, vectors, strict=True)
            if s.superseded_at is None and s.valid_to is None and not s.episode
        ]
        pairs = await choose_links(self._index, live, self._links)
        written = await batch.record_links(pairs)
        closed = await batch.close_links(
            [s.version_id for s in sources if s.superseded_at is not None and not s.episode]
        )
        return [*written, *closed]
