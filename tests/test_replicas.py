"""Several server processes on one database: a scope's writes stay serialized across them.

Two real servers (subprocesses) share one PostgreSQL; half the writers talk to each. Each
server's actors only order the writes that reach that process, so everything asserted here
holds only because the database orders a scope's writes too.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace

import asyncpg
import grpc
import pytest

from memory_client.v1 import memory_pb2 as pb
from memory_client.v1 import memory_pb2_grpc as pb_grpc
from memory_server.memory.facts.model import Candidate, Decision, FactKind, LiveFact, Provenance
from memory_server.memory.facts.model import ReconciledCandidate as RC
from memory_server.memory.facts.reconcile import revalidate
from memory_server.memory.identity import Scope
from memory_server.store.facts import PostgresFactStore
from memory_server.store.schema import apply_migrations

from conftest import all_messages, new_id
from server_process import ServerProcess

_WRITERS_PER_SERVER = 50
_TURNS_PER_WRITER = 3
_PREFERENCES = "I prefer dark mode. Always answer in French."
_LEARNED = ("Prefers dark mode", "Wants the assistant to always answer in French")
_MANUAL = "Prefers answers as bullet points"


def _replica(database_url: str) -> ServerProcess:
    """One server on the shared database."""
    return ServerProcess(
        "--database-url",
        database_url,
        "--listen-address",
        "127.0.0.1:0",
        # Nothing is summarized, so a context is exactly the messages before it.
        "--stm-context-tokens",
        "200000",
        # Facts are learned before CompleteTurn answers: the assertions need no waiting.
        "--fact-extract-async",
        "false",
    )


@pytest.fixture
async def replicas(fresh_database_url: str) -> AsyncIterator[list[pb_grpc.MemoryServiceStub]]:
    # Both start (and migrate) at once, as replicas of one Deployment do.
    servers = [_replica(fresh_database_url), _replica(fresh_database_url)]
    channels: list[grpc.aio.Channel] = []
    try:
        await asyncio.gather(*(s.start() for s in servers))
        channels = [grpc.aio.insecure_channel(f"127.0.0.1:{s.port}") for s in servers]
        yield [pb_grpc.MemoryServiceStub(c) for c in channels]
    finally:
        for channel in channels:
            await channel.close()
        codes = await asyncio.gather(*(s.stop() for s in servers))
    errors = [line for s in servers for line in s.log if "Traceback" in line or "ERROR" in line]
    assert not errors, "".join(line for s in servers for line in s.log)
    assert codes == [0, 0]


def _context_ids(response: pb.StartTurnResponse) -> list[str]:
    return [m.message_id for m in response.context.recent_messages]


def _assert_prefixes(order: Sequence[str], turns: Sequence[pb.StartTurnResponse]) -> list[int]:
    """Each turn's context is the stored order up to just before its own message; returns the
    context lengths."""
    position = {message_id: i for i, message_id in enumerate(order)}
    lengths = []
    for turn in turns:
        seen = _context_ids(turn)
        at = position[turn.message.message_id]
        assert seen == list(order[:at]), f"context of message #{at} is not the {at} before it"
        lengths.append(len(seen))
    return lengths


async def _assert_stored_once(
    replicas: Sequence[pb_grpc.MemoryServiceStub], scope: dict[str, str], texts: Sequence[str]
) -> None:
    """The live facts are exactly `texts`, each added once and never changed since."""
    facts = (await replicas[0].ListFacts(pb.ListFactsRequest(**scope, page_size=100))).facts
    assert sorted(f.text for f in facts) == sorted(texts), "duplicate or missing facts"
    for fact in facts:
        for stub in replicas:
            history = await stub.GetFactHistory(
                pb.GetFactHistoryRequest(**scope, fact_id=fact.fact_id)
            )
            assert [e.event for e in history.events] == ["ADD"], fact.text


@pytest.mark.slow
async def test_writes_of_one_scope_are_serialized_across_replicas(
    replicas: list[pb_grpc.MemoryServiceStub],
):
    began = time.monotonic()
    scope = {"username": f"replica-{new_id('user')}", "graphname": "Finance"}
    servers = len(replicas)
    writers = _WRITERS_PER_SERVER * servers

    # 1. Order and idempotency: every writer sends each of its turns, with a client message
    # id, to both replicas at once: one stores it, the other must answer with the same result.
    ordered = new_id()

    async def ask(writer: int) -> list[pb.StartTurnResponse]:
        mine = []
        for turn in range(_TURNS_PER_WRITER):
            request = pb.StartTurnRequest(
                **scope,
                conversation_id=ordered,
                content=f"question {turn} from writer {writer}",
                message_id=f"w{writer}-t{turn}",
            )
            first, again = await asyncio.gather(
                replicas[writer % servers].StartTurn(request),
                replicas[(writer + 1) % servers].StartTurn(request),
            )
            assert again.message == first.message
            assert _context_ids(again) == _context_ids(first)
            mine.append(first)
        return mine

    asked = [t for ts in await asyncio.gather(*(ask(w) for w in range(writers))) for t in ts]
    stored = [m.message_id for m in await all_messages(replicas[0], scope, ordered)]
    acknowledged = [t.message.message_id for t in asked]
    assert sorted(stored) == sorted(acknowledged), "lost or duplicated messages"
    assert len(set(stored)) == len(stored) == writers * _TURNS_PER_WRITER
    assert sorted(_assert_prefixes(stored, asked)) == list(range(len(stored)))

    # 2. Learning: every writer states the same preferences in one shared conversation; both
    # replicas extract them from concurrent turns, and each must be stored once.
    chat = new_id()

    async def state(writer: int) -> tuple[pb.StartTurnResponse, str]:
        stub = replicas[writer % servers]
        started = await stub.StartTurn(
            pb.StartTurnRequest(**scope, conversation_id=chat, content=_PREFERENCES)
        )
        done = await stub.CompleteTurn(
            pb.CompleteTurnRequest(
                **scope,
                conversation_id=chat,
                content="Noted.",
                parent_id=started.message.message_id,
            )
        )
        return started, done.message.message_id

    stated = await asyncio.gather(*(state(w) for w in range(writers)))
    stored = [m.message_id for m in await all_messages(replicas[1], scope, chat)]
    acknowledged = [i for started, reply in stated for i in (started.message.message_id, reply)]
    assert sorted(stored) == sorted(acknowledged), "lost or duplicated messages"
    _assert_prefixes(stored, [started for started, _ in stated])
    await _assert_stored_once(replicas, scope, _LEARNED)

    # 3. AddFact of one text from both replicas at once. The rule: AddFact of a text whose
    # normalised form is already a live fact returns that fact and stores nothing new.
    added = await asyncio.gather(
        *(
            replicas[i % servers].AddFact(
                pb.AddFactRequest(**scope, text=_MANUAL, kind="preference")
            )
            for i in range(10 * servers)
        )
    )
    assert len({a.fact.fact_id for a in added}) == 1
    assert len({a.fact.version_id for a in added}) == 1

    await _assert_stored_once(replicas, scope, [*_LEARNED, _MANUAL])
    assert time.monotonic() - began < 60


def test_stale_decisions_are_rechecked_without_embeddings():
    """What an apply does on its last try when other servers changed the facts meanwhile."""
    pref = FactKind.PREFERENCE
    live = [
        LiveFact("dark", "v1", "Prefers dark mode", pref),  # added by another server meanwhile
        LiveFact("tea", "v2", "Prefers tea", pref),
    ]
    decided = [
        RC(Decision.ADD, Candidate("prefers DARK mode!", pref)),
        RC(Decision.ADD, Candidate("Likes jazz", pref)),
        RC(Decision.UPDATE, Candidate("Prefers coffee", pref), "gone"),  # deleted meanwhile
        RC(Decision.DELETE, Candidate("Likes blues", pref, retraction=True), "gone"),
        RC(Decision.NONE, Candidate("Uses GSQL", pref), "gone"),
        RC(Decision.UPDATE, Candidate("Prefers matcha", pref), "tea"),
        RC(Decision.NONE, Candidate("Likes jazz", pref)),
    ]
    assert [(d.decision, d.target_fact_id) for d in revalidate(decided, live)] == [
        (Decision.NONE, "dark"),  # stated by both: stored once
        (Decision.ADD, ""),
        (Decision.ADD, ""),  # what it would have replaced is gone: it stands on its own
        (Decision.NONE, ""),  # nothing left to retract
        (Decision.ADD, ""),  # what it restated was removed meanwhile
        (Decision.UPDATE, "tea"),
        (Decision.NONE, ""),
    ]


async def test_servers_send_a_version_to_the_index_in_order(fresh_database_url: str):
    """While one server sends a version, another does not send that version's later change:
    it could land first and be overwritten by the older state."""
    async with asyncpg.create_pool(fresh_database_url, min_size=1, max_size=4) as pool:
        async with pool.acquire() as conn:
            await apply_migrations(conn)
        store = PostgresFactStore(pool)
        scope, provenance = Scope("outbox-order", "Finance"), Provenance(extractor="test")
        tea = Candidate("Prefers tea", FactKind.PREFERENCE)
        [added] = await store.apply(scope, [RC(Decision.ADD, tea)], provenance, max_live=10)
        async with store.claim_outbox(10) as first:  # server A, its index request in flight
            assert [i.version_id for i in first.items] == [added.version_id]
            retraction = replace(tea, retraction=True)
            await store.apply(
                scope,
                [RC(Decision.DELETE, retraction, added.fact_id)],
                provenance,
                max_live=10,
                ended=False,
            )
            async with store.claim_outbox(10) as second:  # server B
                assert second.items == []
            await first.done()
        async with store.claim_outbox(10) as later:
            assert [i.version_id for i in later.items] == [added.version_id]
            assert (await later.sources())[added.version_id].superseded_at is not None
