"""GraphRAG's memory_config as its operators write it (issue 33): the SQLAlchemy-style
`postgresql+psycopg://` URL in a config file and in the environment starts the server against a
real PostgreSQL (the tests' embedded one, reached through the URL as a password-checked role),
and a URL the server cannot honour is refused with one line naming the part, never the
password."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import asyncpg
import pytest

from memory_client.v1 import memory_pb2 as pb
from memory_client.v1 import memory_pb2_grpc as pb_grpc
from memory_server.database_url import DatabaseUrlError, parse_database_url
from memory_server.settings import SettingsError, load_settings, settings_from_cli

from server_process import ServerProcess

# GraphRAG's block, as issue 33 quotes it: only the host differs (the tests' PostgreSQL listens
# on a Unix socket, named by the `host` query parameter libpq and asyncpg both read).
BLOCK: dict[str, object] = {
    "enabled": True,
    "database_url": "postgresql+psycopg://graphrag:graphrag@postgres:5432/graphrag",
    "stm_context_tokens": 6000,
    "ltm_top_k": 5,
    "ltm_score_threshold": 0.7,
    "ltm_retention_days": 365,
    "max_facts_per_scope": 1000,
    "fact_extract_async": True,
}
WRONG_PASSWORD = "N0t-the-Pa55word-7f3"


@dataclass(frozen=True)
class GraphragDatabase:
    socket_dir: str

    def url(self, password: str = "graphrag", driver: str = "psycopg", query: str = "") -> str:
        host = query or f"host={self.socket_dir}"
        return f"postgresql+{driver}://graphrag:{password}@/graphrag?{host}"


@pytest.fixture
async def graphrag_db(database_url: str) -> AsyncIterator[GraphragDatabase]:
    """Role `graphrag` (password `graphrag`, checked: scram, not the trust the other tests'
    roles get) owning database `graphrag` with pgvector, on the tests' shared PostgreSQL."""
    admin = await asyncpg.connect(database_url)
    hba = Path(await admin.fetchval("SHOW hba_file"))
    before = hba.read_text()
    try:
        hba.write_text("local all graphrag scram-sha-256\n" + before)
        await admin.execute("SELECT pg_reload_conf()")
        await admin.execute("CREATE ROLE graphrag LOGIN PASSWORD 'graphrag'")
        await admin.execute("CREATE DATABASE graphrag OWNER graphrag")
        own = await asyncpg.connect(database_url.replace("/graphrag_memory", "/graphrag", 1))
        await own.execute("CREATE EXTENSION IF NOT EXISTS vector")
        await own.close()
        yield GraphragDatabase(parse_qs(urlsplit(database_url).query)["host"][0])
    finally:
        hba.write_text(before)
        await admin.execute("SELECT pg_reload_conf()")
        await admin.execute("DROP DATABASE IF EXISTS graphrag WITH (FORCE)")
        await admin.execute("DROP ROLE IF EXISTS graphrag")
        await admin.close()


def _environment(block: dict[str, object]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHRAG_MEMORY_")}
    for key, value in block.items():
        env[f"GRAPHRAG_MEMORY_{key.upper()}"] = json.dumps(value).strip('"')
    return env


async def _serves_from(db: GraphragDatabase, server: ServerProcess) -> None:
    """A fact stored through the server lands in database `graphrag`, read back as its role."""
    await server.start(timeout_s=120)
    try:
        async with server.channel() as channel:
            stub = pb_grpc.MemoryServiceStub(channel)
            added = await stub.AddFact(
                pb.AddFactRequest(username="ops", graphname="Finance", text="Prefers French")
            )
            found = await stub.SearchFacts(
                pb.SearchFactsRequest(username="ops", graphname="Finance", query="French", top_k=3)
            )
        assert [r.fact.fact_id for r in found.results][:1] == [added.fact.fact_id]
        conn = await asyncpg.connect(parse_database_url(db.url()).dsn)
        try:
            stored = await conn.fetchval("SELECT count(*) FROM facts")
        finally:
            await conn.close()
        assert stored == 1
    finally:
        assert await server.stop() == 0
    log = "".join(server.log)
    assert "graphrag:graphrag@" not in log, log  # the URL is never logged with its password


async def test_graphrag_block_in_a_config_file_starts_the_server(
    graphrag_db: GraphragDatabase, tmp_path: Path
) -> None:
    config = tmp_path / "server_config.json"
    block = {**BLOCK, "database_url": graphrag_db.url()}
    config.write_text(json.dumps({"db_config": {}, "memory_config": block}))
    server = ServerProcess(
        "--config", str(config), "--listen-address", "127.0.0.1:0", "--log-level", "debug"
    )
    await _serves_from(graphrag_db, server)


async def test_graphrag_block_in_the_environment_starts_the_server(
    graphrag_db: GraphragDatabase,
) -> None:
    env = _environment({**BLOCK, "database_url": graphrag_db.url(driver="psycopg2")})
    env["GRAPHRAG_MEMORY_LISTEN_ADDRESS"] = "127.0.0.1:0"
    env["GRAPHRAG_MEMORY_LOG_LEVEL"] = "debug"
    await _serves_from(graphrag_db, ServerProcess(env=env))


async def test_several_hosts_and_session_attrs_are_honoured(
    graphrag_db: GraphragDatabase, tmp_path: Path
) -> None:
    """Two socket directories, the first with no server: asyncpg tries them in order, and the
    one it keeps must be a primary (`target_session_attrs`)."""
    hosts = f"host={tmp_path},{graphrag_db.socket_dir}&target_session_attrs=read-write"
    url = graphrag_db.url(query=f"{hosts}&sslmode=disable&application_name=memory")
    server = ServerProcess("--database-url", url, "--listen-address", "127.0.0.1:0")
    await _serves_from(graphrag_db, server)


async def test_a_refused_password_is_one_line_without_it(graphrag_db: GraphragDatabase) -> None:
    url = graphrag_db.url(password=WRONG_PASSWORD, driver="asyncpg")
    server = ServerProcess("--database-url", url, "--listen-address", "127.0.0.1:0")
    with pytest.raises(AssertionError, match="did not start"):
        await server.start(timeout_s=120)
    assert await server.wait() == 1
    log = "".join(server.log)
    assert WRONG_PASSWORD not in log
    [line] = [x for x in server.log if "cannot start" in x]
    assert "postgresql+asyncpg://graphrag:***@/graphrag" in line, log
    assert 'password authentication failed for user "graphrag"' in line, log


def test_the_block_loads_from_a_file_and_from_the_environment(tmp_path: Path) -> None:
    config = tmp_path / "server_config.json"
    config.write_text(json.dumps({"memory_config": BLOCK}))
    from_file = load_settings(config_path=config)
    from_env = load_settings(environ=_environment(BLOCK))
    for settings in (from_file, from_env):
        assert settings.database_url == BLOCK["database_url"]
        assert (settings.ltm_top_k, settings.max_facts_per_scope) == (5, 1000)
    url = parse_database_url(str(BLOCK["database_url"]))
    assert url.dsn == "postgresql://graphrag:graphrag@postgres:5432/graphrag"
    assert url.shown == "postgresql+psycopg://graphrag:***@postgres:5432/graphrag"


@pytest.mark.parametrize(
    ("url", "dsn"),
    [
        ("postgres://u:pw@h/db", "postgresql://u:pw@h/db"),
        ("postgresql+pg8000://u:pw@h:5433/db", "postgresql://u:pw@h:5433/db"),
        (
            "postgresql+asyncpg://u:p%40ss@h1:5432,h2:5433/db?target_session_attrs=read-write"
            "&sslmode=verify-full&application_name=memory",
            "postgresql://u:p%40ss@h1:5432,h2:5433/db?target_session_attrs=read-write"
            "&sslmode=verify-full&application_name=memory",
        ),
        ("postgresql://u@[::1]:5432/db?connect_timeout=5", "postgresql://u@[::1]:5432/db"),
        ("postgresql+psycopg:///db?host=/run/postgresql", "postgresql:///db?host=/run/postgresql"),
    ],
)
def test_urls_asyncpg_can_honour(url: str, dsn: str) -> None:
    assert parse_database_url(url).dsn == dsn


def test_connect_timeout_becomes_the_connect_timeout() -> None:
    assert parse_database_url("postgresql://h/db?connect_timeout=2.5").connect_timeout_s == 2.5
    assert parse_database_url("postgresql://h/db").connect_timeout_s is None


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("mysql://u:s3cr3t-pw@h/db", "expected postgresql://"),
        ("postgresql+oracle://u:s3cr3t-pw@h/db", "driver 'oracle'"),
        ("postgres+psycopg://u:s3cr3t-pw@h/db", "postgresql+psycopg"),
        ("postgresql://u:s3cr3t-pw@h/db?sslmode=sometimes", "sslmode 'sometimes'"),
        ("postgresql://u:s3cr3t-pw@h/db?target_session_attrs=any-old", "target_session_attrs"),
        ("postgresql://u:s3cr3t-pw@h/db?keepalives=1", "query parameter 'keepalives'"),
        ("postgresql://u:s3cr3t-pw@h/db?options=-csearch_path%3Dx", "query parameter 'options'"),
        ("postgresql://u:s3cr3t-pw@h:99999/db", "port '99999'"),
        ("postgresql://u:s3cr3t-pw@h/db?port=x", "port 'x'"),
        ("postgresql://u:s3cr3t@pw@h/db", "percent-encode"),
        ("postgresql://u:s3cr3t-pw@h/db?connect_timeout=soon", "connect_timeout 'soon'"),
        ("postgresql://u@h/db?password=s3cr3t-pw&gssencmode=disable", "'gssencmode'"),
    ],
)
def test_urls_refused_name_the_part_and_hide_the_password(url: str, named: str) -> None:
    with pytest.raises(DatabaseUrlError, match=re.escape(named)) as refused:
        parse_database_url(url)
    assert "s3cr3t" not in str(refused.value)
    with pytest.raises(SettingsError, match="database_url") as from_settings:
        settings_from_cli(["--database-url", url], {})
    assert "s3cr3t" not in str(from_settings.value) and named in str(from_settings.value)


def test_the_server_refuses_a_url_in_one_line() -> None:
    url = "postgresql+psycopg://graphrag:s3cr3t-pw@postgres:5432/graphrag?keepalives=1"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHRAG_MEMORY_")}
    env["GRAPHRAG_MEMORY_DATABASE_URL"] = url
    done = subprocess.run(
        [sys.executable, "-m", "memory_server"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith("graphrag-memory-server: configuration error: database_url (from ")
    assert "GRAPHRAG_MEMORY_DATABASE_URL" in line and "'keepalives'" in line
    assert "s3cr3t" not in done.stderr + done.stdout


def test_the_readme_shows_the_block_as_graphrag_writes_it() -> None:
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    section = readme.split("\n## Configuration\n", 1)[1]
    shown = section.split("```json\n", 1)[1].split("```", 1)[0]
    assert json.loads(shown) == {"memory_config": BLOCK}
