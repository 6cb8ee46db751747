"""Entry point: the one place that knows every component. Builds them in order inside an
AsyncExitStack, serves, and on SIGTERM tears them down in reverse."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Sequence
from contextlib import AsyncExitStack

import asyncpg
import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from memory_client.v1 import memory_pb2, memory_pb2_grpc
from memory_server.actors import ActorRegistry
from memory_server.api.draining import InFlight, stop_draining
from memory_server.api.interceptors import EdgeInterceptor
from memory_server.api.servicer import MemoryServicer
from memory_server.embedding.backend import AsyncEmbeddingBackend, EmbeddingBackend
from memory_server.embedding.pool import EmbeddingPool
from memory_server.extraction.secret_process import ProcessSecretFilter
from memory_server.index.pgvector import Hnsw, PgVectorIndex
from memory_server.index.tigergraph import TigerGraphIndex, install_until_done
from memory_server.logs import configure_logging
from memory_server.long_term import LongTerm, build_long_term, embedding_backend
from memory_server.memory.background import finish_or_cancel
from memory_server.memory.conversation.compaction import Compactor
from memory_server.memory.conversation.history import ConversationHistory
from memory_server.memory.conversation.stm import StmBudget
from memory_server.memory.conversation.summary import ExtractiveSummarizer
from memory_server.memory.errors import Unavailable
from memory_server.memory.facts.retention import RetentionJob
from memory_server.memory.ports import Summarizer
from memory_server.memory.recall.seen import SeenRecorder
from memory_server.memory.turn.turns import Turns
from memory_server.metrics import LoopLagProbe, Metrics, MetricsEndpoint
from memory_server.outbox.fresh import FreshIndex
from memory_server.outbox.links import LinkSettings
from memory_server.outbox.worker import OutboxWorker
from memory_server.settings import Settings, SettingsError, settings_from_cli
from memory_server.store.conversations import PostgresConversationStore
from memory_server.store.database import open_database
from memory_server.store.facts import PostgresFactStore
from memory_server.tokens import TiktokenCounter

log = logging.getLogger(__name__)

SERVICE_NAME = memory_pb2.DESCRIPTOR.services_by_name["MemoryService"].full_name
# Worker threads' CPU work (secret scans, summaries of an import) holds the GIL, and the loop
# waits up to this long for it at each wake-up: Python's default slowed every turn meanwhile
# (bench/README.md, "Figures behind the code").
GIL_SWITCH_INTERVAL_S = 0.0005


class MemoryServer:
    """The running service. `start()` builds everything; `close()` (idempotent, safe before
    start) drains and tears down: health NOT_SERVING → stop accepting → in-flight RPCs finish
    within the grace period → actors drain → pools close → embedded PostgreSQL stops."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._stack = AsyncExitStack()
        self._server: grpc.aio.Server | None = None
        self._health = health.aio.HealthServicer()
        self._in_flight = InFlight()  # the edge's unary calls, drained at shutdown
        self.port = 0
        self.metrics = Metrics()
        self.metrics_port = 0
        self._serving = False
        self.database_dsn = ""
        self.long_term: LongTerm | None = None
        self.index: PgVectorIndex | TigerGraphIndex | None = None
        self.outbox: OutboxWorker | None = None
        self.embedder: EmbeddingPool | None = None
        self.retention: RetentionJob | None = None

    async def start(self) -> None:
        try:
            await self._start()
        except BaseException:
            await self._stack.aclose()
            raise

    async def _start(self) -> None:
        settings = self.settings
        sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
        await self._stack.enter_async_context(LoopLagProbe(self.metrics))  # closed last
        if settings.metrics_address:
            # First in, last out: scrapes keep answering while the rest drains.
            endpoint = MetricsEndpoint(
                self.metrics, settings.metrics_address, lambda: self._serving
            )
            await endpoint.start()
            self._stack.push_async_callback(endpoint.close)
            self.metrics_port = endpoint.port
        servicer_memory: Turns | None = None
        history: ConversationHistory | None = None
        if settings.enabled:
            servicer_memory, history = await self._start_memory(settings)
        edge = EdgeInterceptor(
            metrics=self.metrics, auth_token=settings.auth_token, tracing=settings.tracing
        )
        self._in_flight = edge.in_flight
        server = grpc.aio.server(
            interceptors=[edge],
            options=[
                ("grpc.max_receive_message_length", settings.max_request_bytes),
                ("grpc.max_send_message_length", settings.max_request_bytes),
                ("grpc.so_reuseport", 0),
                # Clients (memory_client) ping every 30 s to keep idle connections alive;
                # the server must accept that rather than answer "too_many_pings".
                ("grpc.keepalive_permit_without_calls", 1),
                ("grpc.http2.min_recv_ping_interval_without_data_ms", 10_000),
            ],
        )
        memory_pb2_grpc.add_MemoryServiceServicer_to_server(
            MemoryServicer(
                settings,
                servicer_memory,
                history,
                self.long_term.recall if self.long_term else None,
                self.long_term.facts if self.long_term else None,
                episodes=self.long_term.episodes if self.long_term else None,
            ),
            server,
        )
        health_pb2_grpc.add_HealthServicer_to_server(self._health, server)
        if settings.reflection:
            reflection.enable_server_reflection(
                (
                    SERVICE_NAME,
                    health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
                    reflection.SERVICE_NAME,
                ),
                server,
            )
        credentials = server_credentials(settings)
        if credentials is None:
            self.port = server.add_insecure_port(settings.listen_address)
        else:
            self.port = server.add_secure_port(settings.listen_address, credentials)
        if self.port == 0:
            raise OSError(f"cannot listen on {settings.listen_address}")
        await server.start()
        self._server = server
        for name in ("", SERVICE_NAME):
            await self._health.set(name, health_pb2.HealthCheckResponse.SERVING)
        self._serving = True
        host = settings.listen_address.rpartition(":")[0]
        log.info(
            "graphrag-memory listening on %s:%d (memory %s, %s%s)",
            host,
            self.port,
            "enabled" if settings.enabled else "disabled",
            "plaintext" if credentials is None else "TLS",
            ", mutual TLS" if settings.tls_client_ca_file else "",
        )

    async def _start_memory(self, settings: Settings) -> tuple[Turns, ConversationHistory]:
        backend = embedding_backend(settings)
        # The embedded pgvector proves it runs on this CPU before anything is served.
        check = backend.dimension if settings.vector_index != "tigergraph" else None
        self.database_dsn, pool = await open_database(settings, self._stack, vector_dimension=check)

        counter = TiktokenCounter()
        summarizer: Summarizer = ExtractiveSummarizer(counter)
        if settings.llm_base_url:
            from memory_server.llm.summarizer import OpenAICompatibleSummarizer

            llm = OpenAICompatibleSummarizer(
                base_url=settings.llm_base_url,
                model=settings.llm_model,
                api_key=settings.llm_api_key or None,
                counter=counter,
                fallback=summarizer,
                timeout_s=settings.llm_timeout_seconds,
            )
            await self._stack.enter_async_context(llm)
            summarizer = llm

        registry = ActorRegistry(
            mailbox_size=settings.mailbox_size, idle_seconds=settings.actor_idle_seconds
        )
        await registry.start()
        self._stack.push_async_callback(registry.close, settings.shutdown_grace_seconds)
        secrets = ProcessSecretFilter()  # stopped after everything that scans
        self._stack.push_async_callback(asyncio.to_thread, secrets.close)
        self.long_term = ltm = await self._start_long_term(
            settings, pool, registry, backend, secrets
        )
        self.metrics.observe_state(
            actors=lambda: (registry.actors_alive, registry.mailbox_depth()),
            outbox=self.outbox.backlog if self.outbox is not None else None,
            learning=lambda: ltm.learning.pending,
            index=self.index.backlog if isinstance(self.index, TigerGraphIndex) else None,
        )
        conversations = PostgresConversationStore(pool)
        memory = Turns(
            store=conversations,
            executor=registry,
            compactor=Compactor(
                store=conversations,
                counter=counter,
                summarizer=summarizer,
                budget=StmBudget.create(
                    counter, settings.stm_context_tokens, settings.summary_max_tokens
                ),
            ),
            inline_after_reply=not settings.fact_extract_async,
            recall=ltm.recall,
            learning=ltm.learning,
            redactor=secrets if settings.redact_secrets else None,
            episodes=ltm.episodes,
        )
        # Closed first (exit stack order): compactions and extractions use everything else.
        self._stack.push_async_callback(memory.close, settings.shutdown_grace_seconds)
        return memory, ConversationHistory(store=conversations, executor=registry)

    async def _start_long_term(
        self,
        settings: Settings,
        pool: asyncpg.Pool,
        registry: ActorRegistry,
        backend: EmbeddingBackend | AsyncEmbeddingBackend,
        secrets: ProcessSecretFilter,
    ) -> LongTerm:
        """The embedding pool, the vector index and the outbox actor. Nothing here loads a
        model or touches the index until a scope has facts."""
        embedder = EmbeddingPool(
            backend,
            max_batch=settings.embedding_batch_size,
            max_wait_ms=settings.embedding_max_wait_ms,
            cache_size=settings.embedding_cache_size,
            observe_batch=self.metrics.embedding_batch,
        )
        await self._stack.enter_async_context(embedder)
        facts = PostgresFactStore(pool)
        await facts.check_embedding_model(embedder.model_name, embedder.dimension)
        self.index = await self._vector_index(settings, pool, embedder.dimension)
        self.outbox = OutboxWorker(
            facts,
            self.index,
            embedder.background(),  # questions go first
            batch_size=settings.outbox_batch_size,
            poll_interval_s=settings.outbox_poll_seconds,
            max_backoff_s=settings.outbox_max_backoff_seconds,
            linger_s=settings.outbox_linger_seconds,
            links=LinkSettings(settings.ltm_link_threshold, settings.ltm_links_per_fact),
            redactor=None if settings.redact_secrets else secrets,
        )
        await self.outbox.start()
        self._stack.push_async_callback(self.outbox.close, settings.shutdown_grace_seconds)
        self.embedder = embedder
        # After the pool on the stack, so closing flushes the last counts before the pool goes.
        seen = SeenRecorder(facts)
        await seen.start()
        self._stack.push_async_callback(seen.close)
        self.retention = RetentionJob(
            facts,
            registry,
            retention_days=settings.ltm_retention_days,
            interval_s=settings.retention_interval_seconds,
            outbox=self.outbox,
            seen=seen,
            episodes=PostgresConversationStore(pool),
        )
        await self.retention.start()
        self._stack.push_async_callback(self.retention.close)
        return build_long_term(
            settings,
            store=facts,
            episode_store=PostgresConversationStore(pool),
            index=FreshIndex(self.index, facts, embedder),  # reads its own writes
            embedder=embedder,
            executor=registry,
            secrets=secrets,
            outbox=self.outbox,
            telemetry=self.metrics,
            seen=seen,
            stack=self._stack,
        )

    async def _vector_index(
        self, settings: Settings, pool: asyncpg.Pool, dimension: int
    ) -> PgVectorIndex | TigerGraphIndex:
        if settings.vector_index != "tigergraph":
            hnsw = Hnsw(ef_search=settings.pgvector_hnsw_ef_search)
            return PgVectorIndex(
                pool, dimension, hnsw, request="hnsw" if settings.pgvector_hnsw else "exact"
            )
        index = TigerGraphIndex(
            settings.tigergraph_host,
            settings.tigergraph_graph,
            token=settings.tigergraph_token or None,
            gsql_secret=settings.tigergraph_gsql_secret or None,
            username=settings.tigergraph_username or None,
            password=settings.tigergraph_password or None,
            dimension=dimension,
            timeout_s=settings.request_timeout_seconds,
            tls_verify=settings.tigergraph_tls_verify,
        )
        self._stack.push_async_callback(index.aclose)
        if settings.tigergraph_install_schema:
            try:
                await index.install_schema()
            except Unavailable as exc:
                # A TigerGraph outage, a JSON 5xx, a REST-3002 or an INSTALL QUERY slower than
                # the request timeout must not keep the service down: turns keep their
                # short-term memory (long_term.degraded), the outbox retries, and the install
                # keeps trying in the background with a longer install timeout.
                log.warning("TigerGraph schema not installed at start, retrying: %s", exc)
                task = asyncio.create_task(install_until_done(index), name="tg-install")
                self._stack.push_async_callback(finish_or_cancel, [task], 0.0)
        return index

    async def close(self) -> None:
        server, self._server = self._server, None
        self._serving = False
        if server is not None:
            await self._health.enter_graceful_shutdown()
            await stop_draining(server, self._in_flight, self.settings.shutdown_grace_seconds)
        await self._stack.aclose()

    async def __aenter__(self) -> MemoryServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def server_credentials(settings: Settings) -> grpc.ServerCredentials | None:
    """TLS from the configured PEM files (None: plaintext); with a client CA, callers must
    present a certificate it signed."""
    if not settings.tls_cert_file:
        return None
    with open(settings.tls_key_file, "rb") as key, open(settings.tls_cert_file, "rb") as chain:
        pair = (key.read(), chain.read())
    client_ca = None
    if settings.tls_client_ca_file:
        with open(settings.tls_client_ca_file, "rb") as ca:
            client_ca = ca.read()
    return grpc.ssl_server_credentials(
        [pair], root_certificates=client_ca, require_client_auth=client_ca is not None
    )


async def serve(settings: Settings) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    server = MemoryServer(settings)
    starting = asyncio.ensure_future(server.start())
    stopping = asyncio.ensure_future(stop.wait())
    await asyncio.wait((starting, stopping), return_when=asyncio.FIRST_COMPLETED)
    if not starting.done():
        # A signal while starting (the database may be recovering for minutes): give up the
        # start, which closes whatever it had opened.
        log.info("shutting down before the server started")
        starting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await starting
        log.info("stopped")
        return
    stopping.cancel()
    starting.result()  # a failed start raises here
    try:
        await stop.wait()
        log.info("shutting down")
    finally:
        await server.close()
    log.info("stopped")


def cli(argv: Sequence[str] | None = None) -> None:
    try:
        settings = settings_from_cli(argv, os.environ)
    except SettingsError as exc:
        sys.stderr.write(f"graphrag-memory-server: configuration error: {exc}\n")
        raise SystemExit(2) from None
    configure_logging(settings.log_level, settings.log_format)
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve(settings))
    except (OSError, RuntimeError) as exc:
        log.error("cannot start: %s", exc)
        raise SystemExit(1) from None


if __name__ == "__main__":
    cli()
