"""Administrative commands: `python -m memory_server.admin COMMAND [settings flags]`.

  reembed   Switch the stored vectors to the configured embedding model: records the new model,
            empties the vector index and queues every fact version (and, with `episodes` on,
            every message that is an episode) for the outbox, which embeds them again once a
            server runs. Fact text, history and messages are untouched.
  episodes-backfill
            Queue every message that is an episode for embedding: the messages stored before
            episodes (migration 0010) or while `episodes` was off. Upserts are idempotent, so
            one already indexed is simply embedded again.
  index-kind show|hnsw|exact
            The database's pgvector index kind: show it, or switch it for every server that
            shares the database (memory_server.index.pgvector_kind).

Settings come from the same places as the server's (--config, GRAPHRAG_MEMORY_*, flags).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import Sequence
from contextlib import AsyncExitStack

import asyncpg

from memory_server.index import pgvector_kind
from memory_server.index.pgvector import PgVectorIndex
from memory_server.long_term import embedding_backend
from memory_server.settings import Settings, SettingsError, settings_from_cli
from memory_server.store.database import open_database

log = logging.getLogger(__name__)


async def reembed(settings: Settings) -> int:
    """Returns how many fact versions were queued for embedding."""
    backend = embedding_backend(settings)
    async with AsyncExitStack() as stack:
        _, pool = await open_database(settings, stack)
        await PgVectorIndex(pool, backend.dimension).reset()
        async with pool.acquire() as conn, conn.transaction():
            await conn.execute("DELETE FROM embedding_model")
            await conn.execute(
                "INSERT INTO embedding_model (model_name, dimension) VALUES ($1, $2)",
                backend.model_name,
                backend.dimension,
            )
            await conn.execute("DELETE FROM vector_outbox WHERE op <> 'purge'")
            status = await conn.execute(
                """INSERT INTO vector_outbox (scope_hash, op, version_id)
                   SELECT s.scope_hash, 'upsert', v.id FROM fact_versions v
                   JOIN scopes s ON s.id = v.scope_id ORDER BY v.recorded_at"""
            )
            episodes = await _queue_episodes(conn) if settings.episodes else 0
    queued = int(status.rsplit(" ", 1)[-1])
    log.info(
        "re-embedding %d fact versions and %d episodes with %s (%d dimensions)",
        queued,
        episodes,
        backend.model_name,
        backend.dimension,
    )
    return queued


async def _queue_episodes(conn: asyncpg.Connection) -> int:
    """Queues every message that is an episode (as migration 0010's trigger queues a new one);
    how many."""
    status = await conn.execute(
        """INSERT INTO vector_outbox (scope_hash, op, version_id, kind)
           SELECT s.scope_hash, 'upsert', memory_episode_id(m.seq), 'episode'
           FROM messages m JOIN scopes s ON s.id = m.scope_id
           WHERE m.recallable AND m.role IN ('user', 'assistant') AND m.content <> ''
           ORDER BY m.seq"""
    )
    return int(status.rsplit(" ", 1)[-1])


async def backfill_episodes(settings: Settings) -> int:
    """Returns how many messages were queued for embedding as episodes."""
    async with AsyncExitStack() as stack:
        _, pool = await open_database(settings, stack)
        async with pool.acquire() as conn, conn.transaction():
            queued = await _queue_episodes(conn)
    log.info("queued %d messages for embedding as episodes", queued)
    return queued


_USAGE = (
    "usage: python -m memory_server.admin reembed [settings flags]\n"
    "       python -m memory_server.admin episodes-backfill [settings flags]\n"
    "       python -m memory_server.admin index-kind show|hnsw|exact [settings flags]\n"
)


def cli(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["index-kind"]:
        raise SystemExit(pgvector_kind.cli(args[1:]))
    if args[:1] not in (["reembed"], ["episodes-backfill"]):
        sys.stderr.write(_USAGE)
        raise SystemExit(2)
    try:
        settings = settings_from_cli(args[1:], os.environ)
    except SettingsError as exc:
        sys.stderr.write(f"configuration error: {exc}\n")
        raise SystemExit(2) from None
    logging.basicConfig(
        level=settings.log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if args[0] == "episodes-backfill":
        episodes = asyncio.run(backfill_episodes(settings))
        sys.stdout.write(f"queued {episodes} messages for embedding as episodes\n")
        return
    queued = asyncio.run(reembed(settings))
    sys.stdout.write(f"queued {queued} fact versions for re-embedding\n")


if __name__ == "__main__":
    cli()
