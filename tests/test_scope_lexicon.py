"""The scope's lexicon and its (scope, word) index (migration 0012): the figures the lexical
signal reads as of now follow every write, on every server sharing the database, and the search
they drive finds what the full scan found. Real server, real PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import asyncpg
import pytest

from memory_client.v1 import memory_pb2 as pb
from memory_server.memory.identity import Scope, scope_hash
from memory_server.memory.ports import AsOf
from memory_server.store.facts import (
    LEXICAL_NOW,
    LEXICAL_STATEMENT,
    PostgresFactStore,
    lexical_arguments,
)
from memory_server.store.schema import apply_migrations, bundled_migrations

from conftest import ServerFactory, new_id

# The figures as the triggers keep them, and as counting the scope's live versions gives them.
KEPT = """
    SELECT c.live_versions AS n,
           COALESCE((SELECT array_agg(l.lexeme || '=' || l.df ORDER BY l.lexeme)
                     FROM scope_lexemes l WHERE l.scope_id = c.scope_id), '{}') AS df
    FROM scope_lexicon c JOIN scopes s ON s.id = c.scope_id
    WHERE s.username = $1 AND s.graphname = $2"""
COUNTED = """
    WITH live AS (
        SELECT v.lexemes FROM fact_versions v JOIN scopes s ON s.id = v.scope_id
        WHERE s.username = $1 AND s.graphname = $2
          AND v.superseded_at IS NULL AND v.valid_to IS NULL
    )
    SELECT (SELECT count(*) FROM live)::int AS n,
           COALESCE((SELECT array_agg(w || '=' || c ORDER BY w)
                     FROM (SELECT w, count(*) AS c
                           FROM live, unnest(tsvector_to_array(live.lexemes)) w
                           GROUP BY w) d), '{}') AS df"""


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    pool = await asyncpg.create_pool(database_url, min_size=1, max_size=2)
    assert pool is not None
    yield pool
    await pool.close()


async def _new_scope(conn: asyncpg.Connection, username: str) -> int:
    """A scope row of `username` on graph G, written directly (no server); its id."""
    scope_id: int = await conn.fetchval(
        "INSERT INTO scopes (username, graphname, scope_hash) VALUES ($1, 'G', $2) RETURNING id",
        username,
        scope_hash(username, "G"),
    )
    return scope_id


async def _store_facts(
    conn: asyncpg.Connection,
    scope_id: int,
    texts: list[str],
    at: datetime,
    superseded_at: list[datetime | None] | None = None,
) -> None:
    """One fact and one version per text, valid and recorded from `at`, written directly (the
    rows the store writes; the lexicon's triggers see them as they see the store's)."""
    for text, superseded in zip(texts, superseded_at or [None] * len(texts), strict=True):
        fact_id = uuid.uuid4()
        await conn.execute(
            "INSERT INTO facts (id, scope_id, kind) VALUES ($1, $2, 'other')", fact_id, scope_id
        )
        await conn.execute(
            "INSERT INTO fact_versions (id, fact_id, scope_id, text, kind, valid_from, "
            "recorded_at, superseded_at) VALUES ($1, $2, $3, $4, 'other', $5, $5, $6)",
            uuid.uuid4(),
            fact_id,
            scope_id,
            text,
            at,
            superseded,
        )


async def _kept_and_counted(
    pool: asyncpg.Pool, scope: dict[str, str]
) -> tuple[tuple[int, list[str]], tuple[int, list[str]]]:
    args = (scope["username"], scope["graphname"])
    kept = await pool.fetchrow(KEPT, *args)
    counted = await pool.fetchrow(COUNTED, *args)
    assert counted is not None
    kept_figures = (kept["n"], list(kept["df"])) if kept is not None else (0, [])
    return kept_figures, (counted["n"], list(counted["df"]))


async def test_the_lexicon_follows_adds_updates_deletes_evictions_and_erasure(
    start_server: ServerFactory, pool: asyncpg.Pool
) -> None:
    memory = await start_server(max_facts_per_scope=4)
    scope = {"username": new_id("user"), "graphname": "Finance"}
    other = {"username": new_id("user"), "graphname": "Finance"}
    await memory.stub.AddFact(pb.AddFactRequest(**other, text="Owns a zeppelin hangar"))
    other_before = await _kept_and_counted(pool, other)

    ids = []
    for text in ("Owns a zeppelin hangar", "Flies zeppelins on weekends", "Lives in Lyon"):
        reply = await memory.stub.AddFact(pb.AddFactRequest(**scope, text=text))
        ids.append(reply.fact.fact_id)
    kept, counted = await _kept_and_counted(pool, scope)
    assert kept == counted and kept[0] == 3 and "zeppelin=2" in kept[1]

    await memory.stub.UpdateFact(
        pb.UpdateFactRequest(**scope, fact_id=ids[2], text="Lives in Marseille")
    )
    kept, counted = await _kept_and_counted(pool, scope)
    assert kept == counted and "marseill=1" in kept[1] and not any("lyon" in w for w in kept[1])

    await memory.stub.DeleteFact(pb.DeleteFactRequest(**scope, fact_id=ids[1], ended=True))
    await memory.stub.DeleteFact(pb.DeleteFactRequest(**scope, fact_id=ids[0], ended=False))
    kept, counted = await _kept_and_counted(pool, scope)
    assert kept == counted == (1, kept[1]) and not any("zeppelin" in w for w in kept[1])

    batch = [pb.NewFact(text=f"Collects {w} stamps") for w in ("red", "blue", "green", "gold")]
    await memory.stub.AddFacts(pb.AddFactsRequest(**scope, facts=batch))  # evicts to the cap
    kept, counted = await _kept_and_counted(pool, scope)
    assert kept == counted and kept[0] == 4 and "stamp=4" in kept[1]

    await memory.stub.ForgetScope(pb.ForgetScopeRequest(**scope))
    assert await _kept_and_counted(pool, scope) == ((0, []), (0, []))
    assert await _kept_and_counted(pool, other) == other_before  # another scope's untouched


async def test_search_as_of_now_ranks_as_the_full_scan_and_never_reads_another_scope(
    start_server: ServerFactory, pool: asyncpg.Pool
) -> None:
    memory = await start_server()
    scope = {"username": new_id("user"), "graphname": "Finance"}
    twin = {"username": new_id("user"), "graphname": "Finance"}
    texts = [
        "Anna's manager is Priya Raman",
        "Anna flies to Lisbon in May for the graph summit",
        "Anna prefers tea over coffee in the morning",
        "Anna adopted a grey cat called Pixel",
        "Priya Raman wants to travel to Kyoto",
        "The fraud graph runs on TigerGraph 4.1",
        "Anna plays the cello in a quartet on Thursdays",
        "Anna's exercise is basketball and O'Brien's gluten-free bakery",
        "Exercise: basketball",
    ]
    for s in (scope, twin):  # the same words in another scope
        await memory.stub.AddFacts(
            pb.AddFactsRequest(**s, facts=[pb.NewFact(text=t) for t in texts])
        )
    store = PostgresFactStore(pool)
    questions = [
        "Where does Anna's manager want to travel?",
        "what does anna drink in the morning",
        "Which instrument does Anna play?",
        "Priya Raman Kyoto",
        # Stems that stemming again would change ("basketbal", "exercis", "gluten-fre"), and
        # an apostrophe: the scan matches them as stored, as the index does.
        "Which basketball exercise, gluten-free bakery of O'Brien's?",
        "basketball exercise",
        "zeppelin",
        "the",
    ]
    own = {
        str(r["id"])
        for r in await pool.fetch(
            "SELECT v.id FROM fact_versions v JOIN scopes s ON s.id = v.scope_id "
            "WHERE s.username = $1",
            scope["username"],
        )
    }
    for question in questions:
        scanned = await pool.fetch(
            LEXICAL_STATEMENT, *lexical_arguments(Scope(**scope), question, 50, AsOf())
        )
        indexed = await store.lexical(Scope(**scope), question, 50, AsOf())
        assert indexed == [(str(r["id"]), pytest.approx(r["coverage"])) for r in scanned]
        assert {i for i, _ in indexed} <= own
    assert await store.lexical(Scope(**scope), "zeppelin", 50, AsOf()) == []
    # The common words as of now come from the lexicon, as of a later point they are counted:
    # "anna" is in 6 of 9 facts (over half); "priya", "raman", "graph", "basketbal" and
    # "exercis" in 2.
    later = AsOf(valid_time=datetime(2100, 1, 1, tzinfo=UTC))
    for as_of in (AsOf(), later):
        assert await store.common_lexemes(Scope(**scope), 0.5, 2, as_of) == {"anna"}
        assert await store.common_lexemes(Scope(**scope), 0.2, 2, as_of) == {
            "anna",
            "basketbal",
            "exercis",
            "graph",
            "priya",
            "raman",
        }


async def test_rarest_words_first_within_the_row_budget(pool: asyncpg.Pool) -> None:
    """A word past the budget finds no rows of its own, yet a row found through a rarer word
    still counts it; the rarest word is read whatever its count."""
    user = new_id("user")
    async with pool.acquire() as conn:
        scope_id = await _new_scope(conn, user)
        texts = [f"Weekly report {i} is filed" for i in range(30)]
        texts += ["Weekly budget review with Ortega", "Ortega approved the report"]
        await _store_facts(conn, scope_id, texts, datetime.now(UTC))

    async def found(question: str, budget: int) -> dict[str, float]:
        rows = await pool.fetch(LEXICAL_NOW, user, "G", question, 50, budget)
        texts_by_id = {
            str(r["id"]): r["text"]
            for r in await pool.fetch(
                "SELECT id, text FROM fact_versions WHERE scope_id = $1", scope_id
            )
        }
        return {texts_by_id[str(r["id"])]: r["coverage"] for r in rows}

    # "ortega" (2 rows) fits a budget of 5; "weekly" (31) and "report" (31) do not.
    narrow = await found("weekly report Ortega", 5)
    assert set(narrow) == {"Weekly budget review with Ortega", "Ortega approved the report"}
    wide = await found("weekly report Ortega", 1000)
    assert len(wide) == 32
    for text, coverage in narrow.items():  # the common words still count where found
        assert coverage == pytest.approx(wide[text])
    # Both words are in 31 rows, over the budget: the rarest (ties by the word) is read alone.
    common = await found("weekly report", 5)
    assert len(common) == 31 and "Ortega approved the report" in common
    assert "Weekly budget review with Ortega" not in common


async def test_the_index_is_what_finds_the_rows(
    start_server: ServerFactory, pool: asyncpg.Pool
) -> None:
    memory = await start_server()
    scope = {"username": new_id("user"), "graphname": "Finance"}
    facts = [pb.NewFact(text=f"Ticket {i} was closed by the night shift") for i in range(600)]
    await memory.stub.AddFacts(pb.AddFactsRequest(**scope, facts=facts[:300]))
    await memory.stub.AddFacts(pb.AddFactsRequest(**scope, facts=facts[300:]))
    async with pool.acquire() as conn:
        await conn.execute("ANALYZE fact_versions")
        plan = "\n".join(
            r[0]
            for r in await conn.fetch(
                "EXPLAIN " + LEXICAL_NOW, scope["username"], "Finance", "ticket 17", 50, 2000
            )
        )
    assert "fact_versions_scoped_lexemes" in plan, plan


async def test_the_migration_counts_what_was_stored_before_it(database_url: str) -> None:
    name = f"lexicon_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(database_url)
    await admin.execute(f'CREATE DATABASE "{name}"')
    conn = await asyncpg.connect(database_url, database=name)
    try:
        migrations = bundled_migrations()
        await apply_migrations(conn, [m for m in migrations if m.version < 12])
        scope_id = await _new_scope(conn, "ann")
        now = datetime.now(UTC)
        await _store_facts(
            conn, scope_id, ["Likes jazz", "Likes blues", "Owns a kayak"], now, [None, now, None]
        )
        await apply_migrations(conn, migrations)
        assert await conn.fetchval("SELECT live_versions FROM scope_lexicon") == 2
        df = {r["lexeme"]: r["df"] for r in await conn.fetch("SELECT * FROM scope_lexemes")}
        assert df == {"like": 1, "jazz": 1, "own": 1, "kayak": 1}
    finally:
        await conn.close()
        await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        await admin.close()
