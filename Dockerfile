# graphrag-memory: minimal image (a later release adds compose, full k8s and metrics).
FROM python:3.11-slim

RUN useradd --system --uid 10001 --home-dir /var/lib/graphrag-memory --create-home memory

WORKDIR /app
COPY pyproject.toml README.md ./
COPY server ./server
COPY clients ./clients
RUN pip install --no-cache-dir .

USER 10001
# Embedded PostgreSQL lives here when no database_url is set; mount a volume to keep it.
VOLUME ["/var/lib/graphrag-memory"]
ENV GRAPHRAG_MEMORY_LISTEN_ADDRESS=0.0.0.0:50051 \
    GRAPHRAG_MEMORY_DATA_DIR=/var/lib/graphrag-memory
EXPOSE 50051
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s \
    CMD ["python", "-m", "memory_server.healthcheck", "127.0.0.1:50051"]
ENTRYPOINT ["graphrag-memory-server"]
