"""Prometheus metrics: one registry per server (several servers can share a test process), the
families below, and an HTTP endpoint (`metrics_address`) serving `GET /metrics` and
`GET /healthz` from the server's event loop.

Counters and histograms are updated as things happen (RPCs by the edge interceptor, embedding
batches by the pool, decisions and dropped secrets by long-term memory). Gauges that describe
state (actors, mailboxes, outbox) are read when scraped, so they are never stale; the outbox
figures take one small query, bounded by a timeout."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from memory_server.lifecycle import Lifecycle

log = logging.getLogger(__name__)

# (rows waiting, seconds the oldest has waited): the outbox's Backlog
OutboxStats = Callable[[], Awaitable[tuple[int, float]]]
# (vectors upserted but not yet reported searchable, seconds since the oldest of them)
IndexStats = Callable[[], Awaitable[tuple[int, float]]]

_PREFIX = "graphrag_memory_"
_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096)
_SCRAPE_QUERY_TIMEOUT_S = 2.0
# The loop-lag probe's sleep: a stall of S seconds shows as at least S minus this.
LOOP_LAG_INTERVAL_S = 0.02
_LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class Metrics:
    """The service's metric families, in a registry of their own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        rpc = ["method", "code"]
        self.rpc_requests = self._counter(
            "rpc_requests", "RPCs answered, by method and gRPC status", rpc
        )
        self.rpc_seconds = self._histogram(
            "rpc_duration_seconds",
            "RPC latency in the server, by method and gRPC status",
            _LATENCY_BUCKETS,
            rpc,
        )
        self.actors_alive = self._gauge("actors_alive", "Scope actors currently running")
        self.mailbox_depth = self._gauge("mailbox_depth", "Writes queued on all scope actors")
        self.outbox_pending = self._gauge(
            "outbox_pending", "Fact changes committed but not yet in the vector index"
        )
        self.outbox_lag = self._gauge(
            "outbox_lag_seconds", "Age of the oldest change waiting in the outbox (0 when empty)"
        )
        self.embedding_batch_size = self._histogram(
            "embedding_batch_size", "Texts per batch of the shared embedding pool", _BATCH_BUCKETS
        )
        self.embedding_batch_seconds = self._histogram(
            "embedding_batch_duration_seconds", "Time to embed one batch", _LATENCY_BUCKETS
        )
        self.fact_decisions = self._counter(
            "fact_decisions", "Reconciliation decisions applied to long-term memory", ["decision"]
        )
        self.secrets_dropped_total = self._counter(
            "secrets_dropped", "Sentences dropped before extraction because they held a secret"
        )
        self.learning_pending = self._gauge(
            "learning_pending",
            "Turns whose background learning (extract, reconcile, apply) has not finished",
        )
        self.learning_seconds = self._histogram(
            "learning_duration_seconds",
            "Background learning of one turn, from its reply to its facts applied",
            _LATENCY_BUCKETS,
        )
        self.live_vectors_missing_total = self._counter(
            "live_vectors_missing",
            "Live facts whose vector the index did not return, embedded again for"
            " reconciliation (a rise on every learning pass means the index replies are misread)",
        )
        self.index_pending = self._gauge(
            "vector_index_pending",
            "Vectors upserted to TigerGraph that its index has not yet reported searchable",
        )
        self.index_lag = self._gauge(
            "vector_index_lag_seconds",
            "Seconds since the oldest upsert TigerGraph's index has not yet reported rebuilt"
            " (0 when all are searchable)",
        )
        self.event_loop_lag = self._histogram(
            "event_loop_lag_seconds",
            f"How late the event loop woke a task sleeping {LOOP_LAG_INTERVAL_S}s: time it spent"
            " on one synchronous step every request of every scope waited behind",
            _LAG_BUCKETS,
        )
        # (method, code) -> the counter and histogram children: labels() on every RPC costs more
        # than the observation itself.
        self._rpc_children: dict[tuple[str, str], tuple[Any, Any]] = {}
        self._actors: Callable[[], tuple[int, int]] | None = None
        self._outbox: OutboxStats | None = None
        self._learning: Callable[[], int] | None = None
        self._index: IndexStats | None = None
        for decision in ("ADD", "UPDATE", "DELETE", "NONE"):
            self.fact_decisions.labels(decision)  # present at 0 before the first decision

    # Every family is named graphrag_memory_<name> and lives in this server's own registry.

    def _counter(self, name: str, doc: str, labels: Sequence[str] = ()) -> Counter:
        return Counter(f"{_PREFIX}{name}", doc, labels, registry=self.registry)

    def _gauge(self, name: str, doc: str) -> Gauge:
        return Gauge(f"{_PREFIX}{name}", doc, registry=self.registry)

    def _histogram(
        self, name: str, doc: str, buckets: Sequence[float], labels: Sequence[str] = ()
    ) -> Histogram:
        return Histogram(f"{_PREFIX}{name}", doc, labels, buckets=buckets, registry=self.registry)

    def observe_state(
        self,
        *,
        actors: Callable[[], tuple[int, int]],
        outbox: OutboxStats | None,
        learning: Callable[[], int] | None = None,
        index: IndexStats | None = None,
    ) -> None:
        """Where the scrape-time gauges come from: (actors alive, queued writes), with
        long-term memory on the outbox's (pending, oldest age) and the turns still learning,
        and with TigerGraph the vector index's (pending, lag): each scrape asks TigerGraph once
        (GET /restpp/vector/status)."""
        self._actors = actors
        self._outbox = outbox
        self._learning = learning
        self._index = index

    # --- Telemetry (the domain's port) and the pool's observer -------------------------------

    def fact_decision(self, decision: str) -> None:
        self.fact_decisions.labels(decision).inc()

    def secrets_dropped(self, sentences: int) -> None:
        if sentences:
            self.secrets_dropped_total.inc(sentences)

    def learned(self, seconds: float) -> None:
        self.learning_seconds.observe(seconds)

    def live_vectors_missing(self, facts: int) -> None:
        if facts:
            self.live_vectors_missing_total.inc(facts)

    def embedding_batch(self, size: int, seconds: float) -> None:
        self.embedding_batch_size.observe(size)
        self.embedding_batch_seconds.observe(seconds)

    def rpc(self, method: str, code: str, seconds: float) -> None:
        children = self._rpc_children.get((method, code))
        if children is None:
            children = (
                self.rpc_requests.labels(method, code),
                self.rpc_seconds.labels(method, code),
            )
            self._rpc_children[(method, code)] = children
        children[0].inc()
        children[1].observe(seconds)

    # --- exposition ----------------------------------------------------------------------------

    async def refresh(self) -> None:
        if self._actors is not None:
            alive, queued = self._actors()
            self.actors_alive.set(alive)
            self.mailbox_depth.set(queued)
        if self._learning is not None:
            self.learning_pending.set(self._learning())
        # Each source is bounded by a timeout: a slow database or a down TigerGraph must not
        # fail the scrape; its gauges keep their last values.
        if self._outbox is not None:
            await _refresh_pair("outbox", self._outbox, self.outbox_pending, self.outbox_lag)
        if self._index is not None:
            await _refresh_pair("vector index", self._index, self.index_pending, self.index_lag)

    def render(self) -> bytes:
        return generate_latest(self.registry)


async def _refresh_pair(
    what: str, source: Callable[[], Awaitable[tuple[int, float]]], count: Gauge, age: Gauge
) -> None:
    """Sets (pending, oldest age) gauges from `source`, or logs why it could not."""
    try:
        async with asyncio.timeout(_SCRAPE_QUERY_TIMEOUT_S):
            pending, lag_s = await source()
    except Exception as exc:
        log.warning("%s metrics not refreshed: %s", what, type(exc).__name__)
    else:
        count.set(pending)
        age.set(lag_s)


class LoopLagProbe(Lifecycle):
    """An owned task that sleeps a fixed interval and records how late it woke into
    `graphrag_memory_event_loop_lag_seconds`: anything holding the loop (a synchronous step, a
    thread that keeps the GIL) shows up there."""

    def __init__(self, metrics: Metrics, interval_s: float = LOOP_LAG_INTERVAL_S) -> None:
        self._lag = metrics.event_loop_lag
        self._interval_s = interval_s
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    async def start(self) -> None:
        if self._task is None and not self._closed:
            self._task = asyncio.create_task(self._probe(), name="loop-lag-probe")

    async def close(self) -> None:
        self._closed = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _probe(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + self._interval_s
            await asyncio.sleep(self._interval_s)
            self._lag.observe(max(0.0, loop.time() - due))


class MetricsEndpoint:
    """`GET /metrics` (Prometheus text format) and `GET /healthz` (200 while serving, 503
    otherwise) over plain HTTP on `address`; port 0 picks a free one (see `port`)."""

    def __init__(self, metrics: Metrics, address: str, serving: Callable[[], bool]) -> None:
        self._metrics = metrics
        self._host, _, port = address.rpartition(":")
        self._port = int(port)
        self._serving = serving
        self._runner: web.AppRunner | None = None
        self.port = 0

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._scrape)
        app.router.add_get("/healthz", self._healthz)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, self._host, self._port, reuse_address=True)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = runner.addresses[0][1]
        log.info("metrics on http://%s:%d/metrics", self._host, self.port)

    async def close(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def _scrape(self, request: web.Request) -> web.Response:
        await self._metrics.refresh()
        return web.Response(
            body=self._metrics.render(), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )

    async def _healthz(self, request: web.Request) -> web.Response:
        if self._serving():
            return web.Response(text="SERVING\n")
        return web.Response(status=503, text="NOT_SERVING\n")
