"""Episodes (issue 30): what was said in one conversation is recalled in another of the same
user and graph, by SearchEpisodes and in a turn's context ("From earlier conversations"), and
never for anyone else; erasure (DeleteConversation, ForgetScope, retention) takes the episodes
and their vectors; `episodes` off keeps messages out of the index. Real server, real
PostgreSQL, the embedded pgvector index."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import grpc
import pytest

from memory_client.v1 import memory_pb2 as pb
from memory_server.memory.identity import Scope
from memory_server.memory.ports import AsOf
from memory_server.memory.recall.episodes import without_own_name

from conftest import RunningServer, ServerFactory, assert_eventually, new_id
from tg_index import server_settings
from tg_server import TGServer

QUESTION = "What was that device the two accounts shared?"
SAID = "The two flagged accounts both logged in from the same device, a Pixel tablet."
REPLY = "Noted: accounts 7781 and 9912 share the Pixel tablet as their device."
SMALL_TALK = ["Good morning!", "Thanks, that helps.", "Let's look at the weekly report."]


def _scope(user: str | None = None, graph: str = "Finance") -> dict[str, str]:
    return {"username": user or new_id("user"), "graphname": graph}


async def _turn(memory: RunningServer, scope: dict[str, str], chat: str, said: str, reply: str):
    started = await memory.stub.StartTurn(
        pb.StartTurnRequest(**scope, conversation_id=chat, content=said)
    )
    await memory.stub.CompleteTurn(
        pb.CompleteTurnRequest(
            **scope, conversation_id=chat, content=reply, parent_id=started.message.message_id
        )
    )
    return started


async def _search(
    memory: RunningServer, scope: dict[str, str], query: str = QUESTION, **kw: object
) -> list[pb.ScoredEpisode]:
    found = await memory.stub.SearchEpisodes(
        pb.SearchEpisodesRequest(**scope, query=query, top_k=5, threshold=0.0, **kw)
    )
    return list(found.results)


async def _indexed(memory: RunningServer, scope: dict[str, str]) -> int:
    """Once the outbox is empty (drained here, or by its own actor, which may hold a batch
    while this runs), the scope's episode vectors the index holds."""
    outbox, index = memory.server.outbox, memory.server.index
    assert outbox is not None and index is not None
    await outbox.drain()

    async def empty() -> bool:
        return (await outbox.backlog()).waiting == 0

    await assert_eventually(empty, what="the outbox sent everything")
    return await index.count(Scope(**scope).episode_partition)


async def _chat_a(memory: RunningServer, scope: dict[str, str]) -> str:
    chat = new_id("a")
    await _turn(memory, scope, chat, SMALL_TALK[0], "Good morning, how can I help?")
    await _turn(memory, scope, chat, SAID, REPLY)
    await _turn(memory, scope, chat, SMALL_TALK[1], SMALL_TALK[2])
    return chat


async def test_what_was_said_in_one_chat_is_recalled_in_another(
    start_server: ServerFactory,
) -> None:
    memory = await start_server(fact_extract_async=False)
    scope = _scope()
    chat_a = await _chat_a(memory, scope)
    assert await _indexed(memory, scope) == 6  # every user and assistant message

    found = await _search(memory, scope)
    top = {r.message.content for r in found[:2]}
    assert top == {SAID, REPLY}, [(r.message.content, r.score) for r in found]
    assert all(r.message.conversation_id == chat_a for r in found)
    assert found[0].score >= found[-1].score and 0 < found[0].score <= 1
    assert found[0].vector_score > 0 and found[0].lexical_score > 0

    # A new chat: its first turn shows the exchange as dated excerpts with their chat.
    chat_b = new_id("b")
    started = await memory.stub.StartTurn(
        pb.StartTurnRequest(**scope, conversation_id=chat_b, content=QUESTION)
    )
    context = started.context
    shown = [e.content for e in context.long_term.episodes]
    assert REPLY in shown or SAID in shown, shown
    assert all(e.conversation_id == chat_a for e in context.long_term.episodes)
    assert QUESTION not in shown  # the turn's own message is not an earlier one
    assert "### From earlier conversations\n" in context.rendered
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    assert f"- {today} (conversation {chat_a}) " in context.rendered
    assert context.long_term.episode_tokens > 0 and context.total_tokens <= context.budget_tokens

    # Within one conversation, the turns in the window are not repeated as episodes.
    again = await memory.stub.StartTurn(
        pb.StartTurnRequest(**scope, conversation_id=chat_a, content=QUESTION)
    )
    window = {m.message_id for m in again.context.recent_messages}
    assert not window & {e.message_id for e in again.context.long_term.episodes}


async def test_episodes_stay_with_their_user_and_graph(start_server: ServerFactory) -> None:
    memory = await start_server()
    scope = _scope()
    await _chat_a(memory, scope)
    await _indexed(memory, scope)
    assert await _search(memory, scope)
    for other in (_scope(), _scope(scope["username"], "Other")):
        assert await _search(memory, other) == []
        started = await memory.stub.StartTurn(
            pb.StartTurnRequest(**other, conversation_id=new_id(), content=QUESTION)
        )
        assert not started.context.long_term.episodes
        assert "From earlier conversations" not in started.context.rendered


async def test_found_at_once_and_as_of_before_it_was_said(start_server: ServerFactory) -> None:
    """Read your own writes: a message waiting in the outbox is scored by meaning too; as of
    a moment before it was stored it is not there."""
    memory = await start_server(outbox_linger_seconds=60.0, outbox_poll_seconds=3600)
    scope = _scope()
    await _chat_a(memory, scope)
    found = await _search(memory, scope, "Which gadget did the two profiles have in common?")
    assert found[0].message.content in {SAID, REPLY} and found[0].vector_score > 0
    before = pb.SearchEpisodesRequest(**scope, query=QUESTION, threshold=0.0)
    before.as_of_transaction_time.FromDatetime(datetime.now(UTC) - timedelta(hours=1))
    assert not (await memory.stub.SearchEpisodes(before)).results


async def test_delete_conversation_erases_its_episodes(start_server: ServerFactory) -> None:
    memory = await start_server()
    scope = _scope()
    chat_a = await _chat_a(memory, scope)
    kept = new_id("kept")
    await _turn(memory, scope, kept, "The Pixel tablet is on my desk.", "Good to know.")
    assert await _indexed(memory, scope) == 8
    await memory.stub.DeleteConversation(
        pb.DeleteConversationRequest(**scope, conversation_id=chat_a)
    )
    assert {r.message.conversation_id for r in await _search(memory, scope)} == {kept}
    assert await _indexed(memory, scope) == 2  # its six vectors left the index


async def test_forget_scope_erases_episodes_and_keeps_the_history_if_asked(
    start_server: ServerFactory,
) -> None:
    memory = await start_server()
    scope = _scope()
    chat_a = await _chat_a(memory, scope)
    assert await _indexed(memory, scope) == 6
    await memory.stub.ForgetScope(pb.ForgetScopeRequest(**scope))
    assert await _search(memory, scope) == []
    assert await _indexed(memory, scope) == 0
    # The conversation is still there for its owner, but no longer long-term memory.
    history = await memory.stub.GetConversation(
        pb.GetConversationRequest(**scope, conversation_id=chat_a)
    )
    assert len(history.messages) == 6
    # What is said afterwards is remembered again.
    await _turn(memory, scope, new_id(), SAID, "Noted.")
    assert [r.message.content for r in await _search(memory, scope)][:1] == [SAID]
    assert await _indexed(memory, scope) == 2
    await memory.stub.ForgetScope(pb.ForgetScopeRequest(**scope, include_conversations=True))
    assert await _search(memory, scope) == []
    assert await _indexed(memory, scope) == 0


async def test_retention_stops_recalling_old_messages(start_server: ServerFactory) -> None:
    memory = await start_server(ltm_retention_days=30)
    scope = _scope()
    chat_a = await _chat_a(memory, scope)
    assert await _indexed(memory, scope) == 6
    assert memory.server.retention is not None
    await memory.server.retention.run_once(datetime.now(UTC) + timedelta(days=31))
    assert memory.server.retention.episodes_expired >= 6
    assert await _search(memory, scope) == []
    assert await _indexed(memory, scope) == 0
    history = await memory.stub.GetConversation(
        pb.GetConversationRequest(**scope, conversation_id=chat_a)
    )
    assert len(history.messages) == 6


async def test_a_fact_and_the_message_it_came_from_are_not_both_shown(
    start_server: ServerFactory,
) -> None:
    memory = await start_server(fact_extract_async=False)
    scope = _scope()
    said = await _turn(memory, scope, new_id(), "I'm allergic to peanuts.", "I'll remember.")
    await _indexed(memory, scope)
    started = await memory.stub.StartTurn(
        pb.StartTurnRequest(**scope, conversation_id=new_id(), content="Am I allergic to peanuts?")
    )
    long_term = started.context.long_term
    assert any("peanuts" in f.text for f in long_term.facts), long_term
    assert said.message.message_id not in {e.message_id for e in long_term.episodes}


async def test_secrets_never_reach_an_episode(start_server: ServerFactory) -> None:
    key = "sk-proj-" + "Zq8xW2vB7nK4mP9sT1rY6uE3aD5fG0hJ"
    for redact in (True, False):
        memory = await start_server(redact_secrets=redact)
        scope = _scope()
        await _turn(
            memory, scope, new_id(), f"My OpenAI key is {key}, use it for the report.", "OK."
        )
        await _indexed(memory, scope)
        found = await _search(memory, scope, "which key for the report")
        if redact:
            assert found and key not in found[0].message.content
            assert "[redacted" in found[0].message.content
        # Whatever is stored, the vector was made from redacted text: its own text with the
        # key finds it no better than the redacted text does.
        assert memory.server.embedder is not None and memory.server.index is not None
        partition = Scope(**scope).episode_partition
        [with_key, redacted] = await memory.server.embedder.embed(
            [f"My OpenAI key is {key}, use it for the report.", found[0].message.content]
        )
        hits_key = await memory.server.index.search(partition, with_key, 1, AsOf())
        hits_red = await memory.server.index.search(partition, redacted, 1, AsOf())
        if redact:
            assert hits_red[0].cosine > 0.999
        else:
            assert hits_red[0].cosine < 0.999 and hits_key[0].cosine < 0.999


async def test_episodes_off_keeps_messages_out_of_the_index(start_server: ServerFactory) -> None:
    memory = await start_server(episodes=False)
    scope = _scope()
    await _chat_a(memory, scope)
    assert await _indexed(memory, scope) == 0
    assert await _search(memory, scope) == []
    started = await memory.stub.StartTurn(
        pb.StartTurnRequest(**scope, conversation_id=new_id(), content=QUESTION)
    )
    assert not started.context.long_term.episodes


@pytest.mark.parametrize(
    ("field", "request_kw"),
    [
        ("query", {"query": ""}),
        ("top_k", {"query": "x", "top_k": 101}),
        ("threshold", {"query": "x", "threshold": 1.5}),
    ],
)
async def test_bad_search_requests_name_the_field(
    start_server: ServerFactory, field: str, request_kw: dict[str, object]
) -> None:
    memory = await start_server()
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await memory.stub.SearchEpisodes(pb.SearchEpisodesRequest(**_scope(), **request_kw))
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert (caught.value.details() or "").startswith(field), caught.value.details()


async def test_episodes_live_in_tigergraph_beside_the_facts(
    start_server: ServerFactory, tg: TGServer
) -> None:
    """The TigerGraph index keeps episodes as MemoryEmbedding vertices of the scope's episode
    partition: found, then deleted with their conversation."""
    memory = await start_server(**server_settings(tg))
    scope = _scope()
    chat_a = await _chat_a(memory, scope)
    assert await _indexed(memory, scope) == 6
    partition = Scope(**scope).episode_partition
    stored = [v for v in tg.state.vertices.values() if v.get("scope_hash") == partition]
    assert len(stored) == 6, tg.state.vertices
    found = await _search(memory, scope)
    assert {r.message.content for r in found[:2]} == {SAID, REPLY}
    await memory.stub.DeleteConversation(
        pb.DeleteConversationRequest(**scope, conversation_id=chat_a)
    )
    assert await _indexed(memory, scope) == 0


@pytest.mark.parametrize(
    ("question", "username", "asked"),
    [
        ("What did Caroline research?", "learn-conv-26-Caroline", "What did research?"),
        ("When did Caroline's mom visit?", "caroline", "When did mom visit?"),
        ("What did Caroline learn?", "learn-caroline", "What did learn?"),  # "learn" kept
        ("Caroline, what did I say?", "caroline", "Caroline, what did I say?"),  # first word
        ("What did Melanie paint?", "learn-conv-26-Caroline", "What did Melanie paint?"),
        ("What did Alice and Bob say?", "alice.smith@corp.com", "What did and Bob say?"),
        ("Which device did Al share?", "al", "Which device did Al share?"),  # too short
    ],
)
def test_the_users_own_name_is_left_out_of_the_question(
    question: str, username: str, asked: str
) -> None:
    assert without_own_name(question, username) == asked


async def test_a_question_naming_the_user_finds_what_they_said(
    start_server: ServerFactory,
) -> None:
    """Messages never name their author; others greet the user by name. Asked with the name,
    the user's own words come first, not the greetings."""
    memory = await start_server()
    scope = _scope("caroline")
    chat = new_id()
    await memory.stub.AppendMessages(
        pb.AppendMessagesRequest(
            **scope,
            conversation_id=chat,
            messages=[
                pb.NewMessage(role=pb.ROLE_ASSISTANT, content="Hi Caroline! Good to see you."),
                pb.NewMessage(role=pb.ROLE_USER, content="I researched adoption agencies."),
                pb.NewMessage(role=pb.ROLE_ASSISTANT, content="Caroline, that's great news!"),
            ],
        )
    )
    found = await _search(memory, scope, "What did Caroline research?")
    assert found[0].message.content == "I researched adoption agencies.", found


async def test_a_when_question_prefers_messages_that_name_a_time(
    start_server: ServerFactory,
) -> None:
    memory = await start_server()
    scope = _scope()
    chat = new_id()
    said = ["I went to the pottery class.", "I went to the pottery class last Friday."]
    await memory.stub.AppendMessages(
        pb.AppendMessagesRequest(
            **scope,
            conversation_id=chat,
            messages=[pb.NewMessage(role=pb.ROLE_USER, content=t) for t in said],
        )
    )
    question = "When did I go to the pottery class?"
    off = await start_server(ltm_time_intent_weight=0.0)
    voted = {r.message.content: r.score for r in await _search(memory, scope, question)}
    plain = {r.message.content: r.score for r in await _search(off, scope, question)}
    # The dated message gains what a dated fact gains: 1 - (1 - score) * (1 - 0.25).
    assert voted[said[1]] == pytest.approx(1 - (1 - plain[said[1]]) * 0.75)
    assert voted[said[0]] == pytest.approx(plain[said[0]])  # names no time
    # A question that does not ask about time votes for nothing.
    what = "What did I go to?"
    assert [r.score for r in await _search(memory, scope, what)] == [
        r.score for r in await _search(off, scope, what)
    ]


async def test_an_imported_message_is_valid_when_said_and_recorded_when_stored(
    start_server: ServerFactory,
) -> None:
    memory = await start_server()
    scope = _scope()
    said = pb.NewMessage(role=pb.ROLE_USER, content="I moved to Lisbon for the new job.")
    # Said a month ago (well inside retention), imported now.
    now = datetime.now(UTC)
    said.created_at.FromDatetime(now - timedelta(days=30))
    await memory.stub.AppendMessages(
        pb.AppendMessagesRequest(**scope, conversation_id=new_id(), messages=[said])
    )
    await _indexed(memory, scope)

    async def found(valid: datetime | None, recorded: datetime | None) -> bool:
        request = pb.SearchEpisodesRequest(**scope, query="Where did I move?", threshold=0.0)
        if valid is not None:
            request.as_of_valid_time.FromDatetime(valid)
        if recorded is not None:
            request.as_of_transaction_time.FromDatetime(recorded)
        return bool((await memory.stub.SearchEpisodes(request)).results)

    week_ago = now - timedelta(days=7)
    assert await found(None, None)
    assert await found(week_ago, None)  # said by then, as we know now
    assert not await found(now - timedelta(days=40), None)  # not yet said
    assert not await found(week_ago, week_ago)  # a week ago this database had not stored it
