"""What bounds episode search's cost (migration 0011): its lexical signal reads a scope's newest
EPISODE_LEXICAL_WINDOW messages and each message's first 8,192 characters; what lies beyond is
still found by its vector. Real server, real PostgreSQL, the embedded pgvector index."""

from __future__ import annotations

import asyncpg

from memory_client.v1 import memory_pb2 as pb
from memory_server.memory.identity import Scope
from memory_server.memory.ports import AsOf
from memory_server.store.conversations import PostgresConversationStore
from memory_server.store.conversations._episodes import EPISODE_LEXICAL_WINDOW

from conftest import ServerFactory, new_id, outbox_caught_up

OLD = "The zeppelin hangar at Friedrichshafen is where my grandfather worked."
NEW = "We toured a zeppelin museum last spring."


async def _lexical(database_url: str, scope: dict[str, str], query: str) -> list[int]:
    pool = await asyncpg.create_pool(database_url, min_size=1, max_size=1)
    try:
        found = await PostgresConversationStore(pool).episode_lexical(
            Scope(**scope), query, 10, AsOf()
        )
    finally:
        await pool.close()
    return [seq for seq, _ in found]


async def test_lexical_episode_search_reads_the_newest_messages_and_vectors_reach_older_ones(
    start_server: ServerFactory, database_url: str
) -> None:
    memory = await start_server()
    scope = {"username": new_id("user"), "graphname": "Finance"}
    chat = new_id()
    filler = [f"Ticket {i} was closed after the nightly batch run." for i in range(1000)]
    appended = 0
    for batch in ([OLD, *filler[:500]], [*filler[500:], NEW]):
        reply = await memory.stub.AppendMessages(
            pb.AppendMessagesRequest(
                **scope,
                conversation_id=chat,
                messages=[pb.NewMessage(role=pb.ROLE_USER, content=text) for text in batch],
            )
        )
        appended += reply.inserted
    assert appended == 1002 > EPISODE_LEXICAL_WINDOW + 1  # OLD is outside the window

    found = await _lexical(database_url, scope, "zeppelin")
    assert len(found) == 1  # NEW only: OLD is past the window
    await outbox_caught_up(memory, timeout_s=120)
    results = await memory.stub.SearchEpisodes(
        pb.SearchEpisodesRequest(**scope, query="zeppelin hangar", top_k=3, threshold=0.0)
    )
    said = [r.message.content for r in results.results]
    assert OLD in said and NEW in said  # by their vectors


async def test_a_long_message_is_found_by_words_in_its_first_8192_characters(
    start_server: ServerFactory, database_url: str
) -> None:
    memory = await start_server()
    scope = {"username": new_id("user"), "graphname": "Finance"}
    pasted = "quarterly " + "ledger lines " * 800 + "marzipan"  # "marzipan" past 8,192
    assert pasted.index("marzipan") > 8192
    await memory.stub.AppendMessages(
        pb.AppendMessagesRequest(
            **scope,
            conversation_id=new_id(),
            messages=[pb.NewMessage(role=pb.ROLE_USER, content=pasted)],
        )
    )
    assert len(await _lexical(database_url, scope, "quarterly")) == 1
    assert await _lexical(database_url, scope, "marzipan") == []
