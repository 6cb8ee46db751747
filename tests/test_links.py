"""Semantic links between facts: written by the outbox after it indexes a version, closed
(never deleted) when an end is superseded or deleted, erased by ForgetScope, never across
scopes, shown by GetFact / GetFactHistory, and followed one hop by search, filtered by the
as-of point before ranking. Real PostgreSQL, the real MiniLM embedder, and both vector
indexes (pgvector, and the TigerGraph stand-in that keeps links as MemoryLink edges)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import asyncpg
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from memory_client.v1 import memory_pb2 as pb
from memory_server.index.tigergraph._index import OPEN_END

from conftest import RunningServer, ServerFactory, assert_eventually
from tg_index import server_settings
from tg_server import TGServer, serve_tigergraph

SUPPORT = "Caroline went to the LGBTQ support group on Monday"
SUPPORT_TOO = "Caroline found the LGBTQ support group inspiring and welcoming"
UNRELATED = "Melanie painted a sunset over the lake with her kids"


@pytest.fixture(params=["pgvector", "tigergraph"])
def backend(request: pytest.FixtureRequest) -> Iterator[tuple[str, TGServer | None]]:
    if request.param == "pgvector":
        yield "pgvector", None
    else:
        with serve_tigergraph() as tg:
            yield "tigergraph", tg


def _overrides(backend: tuple[str, TGServer | None], **kw: Any) -> dict[str, Any]:
    _, tg = backend
    out: dict[str, Any] = dict(server_settings(tg)) if tg is not None else {}
    out.update(kw)
    return out


async def _add(memory: RunningServer, scope: dict[str, str], text: str) -> pb.Fact:
    return (await memory.stub.AddFact(pb.AddFactRequest(**scope, text=text))).fact


async def _links(memory: RunningServer, scope: dict[str, str], fact_id: str) -> list[pb.FactLink]:
    got = await memory.stub.GetFact(pb.GetFactRequest(**scope, fact_id=fact_id))
    return list(got.links)


async def _linked(memory: RunningServer, scope: dict[str, str], fact_id: str, other: str) -> bool:
    return any(link.fact_id == other for link in await _links(memory, scope, fact_id))


async def _link_rows(database_url: str, username: str) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(database_url)
    try:
        return list(
            await conn.fetch(
                """SELECT l.*, sv.fact_id AS source_fact, tv.fact_id AS target_fact,
                          sv.scope_id AS source_scope, tv.scope_id AS target_scope,
                          sv.superseded_at AS source_closed, tv.superseded_at AS target_closed
                   FROM fact_links l JOIN scopes s ON s.id = l.scope_id
                   JOIN fact_versions sv ON sv.id = l.source_version_id
                   JOIN fact_versions tv ON tv.id = l.target_version_id
                   WHERE s.username = $1""",
                username,
            )
        )
    finally:
        await conn.close()


def _edge(tg: TGServer, a: str, b: str) -> dict[str, Any] | None:
    return tg.state.edges.get((min(a, b), max(a, b)))


async def test_links_written_after_indexing_and_shown_by_get_fact(
    start_server: ServerFactory, scope: dict[str, str], backend: tuple[str, TGServer | None]
) -> None:
    memory = await start_server(**_overrides(backend))
    a = await _add(memory, scope, SUPPORT)
    b = await _add(memory, scope, SUPPORT_TOO)
    c = await _add(memory, scope, UNRELATED)
    await assert_eventually(
        lambda: _linked(memory, scope, a.fact_id, b.fact_id), timeout_s=30, what="a link a-b"
    )
    links = await _links(memory, scope, b.fact_id)
    assert [link.fact_id for link in links] == [a.fact_id]  # symmetric; c is too far
    assert links[0].version_id == a.version_id
    assert 0.6 <= links[0].score <= 1.0
    assert links[0].recorded_at.ToDatetime(UTC) == b.recorded_at.ToDatetime(UTC)
    assert await _links(memory, scope, c.fact_id) == []
    history = await memory.stub.GetFactHistory(pb.GetFactHistoryRequest(**scope, fact_id=a.fact_id))
    assert [link.fact_id for link in history.links] == [b.fact_id]
    _, tg = backend
    if tg is not None:
        edge = _edge(tg, a.version_id, b.version_id)
        assert edge is not None and edge["superseded_at"] == OPEN_END
        assert abs(edge["score"] - links[0].score) < 1e-5
        assert _edge(tg, a.version_id, c.version_id) is None


async def test_links_closed_on_supersede_and_delete_and_erased_by_forget(
    start_server: ServerFactory,
    scope: dict[str, str],
    backend: tuple[str, TGServer | None],
    database_url: str,
) -> None:
    memory = await start_server(**_overrides(backend))
    a = await _add(memory, scope, SUPPORT)
    b = await _add(memory, scope, SUPPORT_TOO)
    await assert_eventually(
        lambda: _linked(memory, scope, a.fact_id, b.fact_id), timeout_s=30, what="a link a-b"
    )
    # Supersede a: its old version's link is closed at the moment the version was, and kept.
    updated = (
        await memory.stub.UpdateFact(
            pb.UpdateFactRequest(
                **scope, fact_id=a.fact_id, text="Caroline went to the LGBTQ support group"
            )
        )
    ).fact

    def of_old(rows: list[asyncpg.Record]) -> list[asyncpg.Record]:
        ends = ("source_version_id", "target_version_id")
        return [r for r in rows if a.version_id in (str(r[e]) for e in ends)]

    async def old_link_closed() -> bool:
        old = of_old(await _link_rows(database_url, scope["username"]))
        return len(old) == 1 and old[0]["superseded_at"] is not None

    await assert_eventually(old_link_closed, timeout_s=30, what="the old version's link closed")
    [old] = of_old(await _link_rows(database_url, scope["username"]))
    closed_at = old["source_closed"] or old["target_closed"]
    assert old["superseded_at"] == closed_at and old["recorded_at"] < closed_at
    # The new version is linked again (it is as close to b), after it was indexed.
    await assert_eventually(
        lambda: _linked(memory, scope, b.fact_id, a.fact_id), timeout_s=30, what="relinked"
    )
    assert [x.version_id for x in await _links(memory, scope, b.fact_id)] == [updated.version_id]

    # Delete b: every link of b is closed (not deleted), and GetFact shows none.
    await memory.stub.DeleteFact(pb.DeleteFactRequest(**scope, fact_id=b.fact_id))

    async def all_closed() -> bool:
        rows = await _link_rows(database_url, scope["username"])
        return len(rows) == 2 and all(r["superseded_at"] is not None for r in rows)

    await assert_eventually(all_closed, timeout_s=30, what="b's links closed")
    assert await _links(memory, scope, a.fact_id) == []
    _, tg = backend
    if tg is not None:

        async def edges_closed() -> bool:
            edge = _edge(tg, updated.version_id, b.version_id)
            return edge is not None and edge["superseded_at"] < OPEN_END

        await assert_eventually(edges_closed, timeout_s=30, what="the edge closed in TigerGraph")

    # ForgetScope erases them (with the versions), here and in the index.
    await memory.stub.ForgetScope(pb.ForgetScopeRequest(**scope))
    assert await _link_rows(database_url, scope["username"]) == []
    if tg is not None:
        await assert_eventually(
            lambda: _no_edges(tg, {a.version_id, b.version_id, updated.version_id}),
            timeout_s=30,
            what="edges purged",
        )


async def _no_edges(tg: TGServer, ids: set[str]) -> bool:
    return not any(k[0] in ids or k[1] in ids for k in tg.state.edges)


async def test_never_linked_across_scopes(start_server: ServerFactory, database_url: str) -> None:
    memory = await start_server()
    tag = uuid.uuid4().hex[:8]
    one = {"username": f"links-one-{tag}", "graphname": "Finance"}
    two = {"username": f"links-two-{tag}", "graphname": "Finance"}
    a = await _add(memory, one, SUPPORT)
    # The same text in another scope, and a close one in each: links stay inside each scope.
    await _add(memory, two, SUPPORT)
    b = await _add(memory, one, SUPPORT_TOO)
    b2 = await _add(memory, two, SUPPORT_TOO)
    await assert_eventually(
        lambda: _linked(memory, one, a.fact_id, b.fact_id), timeout_s=30, what="scope one"
    )
    await assert_eventually(
        lambda: _has_links(memory, two, b2.fact_id), timeout_s=30, what="scope two"
    )
    for who in (one, two):
        rows = await _link_rows(database_url, who["username"])
        assert rows
        assert all(r["source_scope"] == r["target_scope"] == r["scope_id"] for r in rows)
    ids_one = {a.fact_id, b.fact_id}
    assert {x.fact_id for x in await _links(memory, one, a.fact_id)} <= ids_one


async def _has_links(memory: RunningServer, scope: dict[str, str], fact_id: str) -> bool:
    return bool(await _links(memory, scope, fact_id))


def _ts(moment: datetime) -> Timestamp:
    ts = Timestamp()
    ts.FromDatetime(moment)
    return ts


async def _search(
    memory: RunningServer, scope: dict[str, str], query: str, as_of: datetime | None = None
) -> dict[str, pb.ScoredFact]:
    request = pb.SearchFactsRequest(**scope, query=query, top_k=10, threshold=0)
    if as_of is not None:
        request.as_of_valid_time.CopyFrom(_ts(as_of))
        request.as_of_transaction_time.CopyFrom(_ts(as_of))
    response = await memory.stub.SearchFacts(request)
    return {r.fact.fact_id: r for r in response.results}


async def test_search_expands_one_hop_filtered_as_of(
    start_server: ServerFactory, scope: dict[str, str]
) -> None:
    # Two servers on one database: one follows links, one does not (expansion is read-time).
    expanding = await start_server(ltm_link_decay=0.9, ltm_link_threshold=0.3)
    plain = await start_server(ltm_link_decay=0.0, ltm_link_threshold=0.3)
    seed = await _add(expanding, scope, "Caroline adopted a puppy named Biscuit last spring")
    before_linked = datetime.now(UTC)
    linked = await _add(expanding, scope, "Biscuit the puppy chews every shoe he finds")
    await assert_eventually(
        lambda: _linked(expanding, scope, seed.fact_id, linked.fact_id),
        timeout_s=30,
        what="a link",
    )
    [link] = [x for x in await _links(expanding, scope, seed.fact_id)]
    query = "What pet did Caroline adopt"
    direct = await _search(plain, scope, query)
    found = await _search(expanding, scope, query)
    source = found[seed.fact_id]
    assert source.score == pytest.approx(direct[seed.fact_id].score)
    expected = source.score * 0.9 * link.score
    # The linked fact scores below its source, by the measured formula, or keeps its own
    # better score; never both rows (deduplicated).
    assert found[linked.fact_id].score == pytest.approx(
        max(expected, direct[linked.fact_id].score if linked.fact_id in direct else 0.0)
    )
    assert found[linked.fact_id].score < source.score
    assert len(found) == len({r.fact.version_id for r in found.values()})

    # As of before the linked fact was recorded, neither it nor its link is believed: the
    # expansion must not bring it in.
    earlier = await _search(expanding, scope, query, as_of=before_linked)
    assert seed.fact_id in earlier and linked.fact_id not in earlier

    # Deleted: not believed now, so not expanded now; as of before the deletion it still is.
    before_delete = datetime.now(UTC)
    await expanding.stub.DeleteFact(pb.DeleteFactRequest(**scope, fact_id=linked.fact_id))
    assert linked.fact_id not in await _search(expanding, scope, query)
    then = await _search(expanding, scope, query, as_of=before_delete)
    assert then[linked.fact_id].score == pytest.approx(found[linked.fact_id].score)


async def test_no_links_when_disabled(start_server: ServerFactory, scope: dict[str, str]) -> None:
    memory = await start_server(ltm_links_per_fact=0)
    a = await _add(memory, scope, SUPPORT)
    b = await _add(memory, scope, SUPPORT_TOO)
    # Wait until b is indexed (its own text finds it by vector), then: no links.
    await assert_eventually(
        lambda: _indexed(memory, scope, b.fact_id, SUPPORT_TOO), timeout_s=30, what="indexed"
    )
    assert await _links(memory, scope, a.fact_id) == []
    assert await _links(memory, scope, b.fact_id) == []


async def _indexed(memory: RunningServer, scope: dict[str, str], fact_id: str, text: str) -> bool:
    found = await _search(memory, scope, text)
    return fact_id in found and found[fact_id].vector_score > 0.99


async def test_writes_do_not_wait_for_a_batch_that_holds_the_scope_key(
    memory: RunningServer, database_url: str, scope: dict[str, str]
) -> None:
    # The outbox's claim transaction writes fact_links, whose foreign key share-locks the
    # scope row until the batch commits (embedding included). AddFact must not wait for it:
    # an upsert of the scope row (ON CONFLICT DO UPDATE) did, holding a pooled connection
    # each, until the pool ran dry (seen on the LoCoMo ingest: UNAVAILABLE after 10 s).
    await _add(memory, scope, "Keeps bees on the roof")
    conn = await asyncpg.connect(database_url)
    try:
        async with conn.transaction():
            await conn.execute(
                "SELECT id FROM scopes WHERE username = $1 AND graphname = $2 FOR KEY SHARE",
                scope["username"],
                scope["graphname"],
            )
            added = await memory.stub.AddFact(
                pb.AddFactRequest(**scope, text="Sells the honey at the market"), timeout=5
            )
            assert added.fact.fact_id
    finally:
        await conn.close()
