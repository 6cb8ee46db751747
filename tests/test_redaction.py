"""Secrets in messages are replaced by typed placeholders before the row is written, so they
never come back through GetConversation, GetContext, the summary, facts or the log; the
`redact_secrets` setting keeps messages verbatim. Real server, real PostgreSQL."""

from __future__ import annotations

import json
import logging

import asyncpg
import pytest
from test_secrets import AFTER, BEFORE, BENIGN, SECRET_SAMPLES

from memory_client.v1 import memory_pb2 as pb
from memory_server.extraction.secrets import DetectSecretsFilter, placeholder

from conftest import RunningServer, ServerFactory, all_messages, new_id
from fake_openai import FakeEmbeddings

API_KEY = "sk-proj-" + "Q7fLm2Rt9XwK4bNc8VhZ1pJd6GsY3aTe5uWq0iPo"
AWS_KEY = "AKIA" + "Z7XQ4LMN2PRT6WVB"
PASSWORD = "Tr0ub4dor&3x!"
USER_TEXT = (
    f"I prefer concise bullet points. My OpenAI key is {API_KEY} and the AWS key is "
    f"{AWS_KEY}. The database password is {PASSWORD}"
)
REPLY_TEXT = f"Noted; I will not repeat {API_KEY} anywhere."
SECRETS = (API_KEY, AWS_KEY, PASSWORD)


def test_placeholders_name_the_type() -> None:
    redacted = DetectSecretsFilter().redact(USER_TEXT)
    assert redacted.secrets_found == 3
    assert redacted.text == (
        "I prefer concise bullet points. My OpenAI key is [redacted: api key] and the AWS key "
        "is [redacted: aws key]. The database password is [redacted: password]"
    )
    assert placeholder("Private Key") == "[redacted: private key]"
    assert placeholder("card-number") == "[redacted: card number]"


@pytest.mark.parametrize("sample", SECRET_SAMPLES, ids=lambda s: s.name)
def test_every_sample_is_redacted_in_place(sample) -> None:  # type: ignore[no-untyped-def]
    text = f"{BEFORE} {sample.sentence}\n{AFTER}"
    redacted = DetectSecretsFilter().redact(text)
    assert redacted.secrets_found == sample.count
    assert redacted.text.count("[redacted: ") == sample.count
    assert redacted.text.startswith(BEFORE) and redacted.text.endswith(AFTER)
    for secret in sample.secrets:
        assert secret not in redacted.text


def test_ordinary_text_is_kept_byte_for_byte() -> None:
    text = "Which suppliers have more than 3 open invoices?\r\n  Group them by region, please."
    assert DetectSecretsFilter().redact(text).text == text


async def _rows(database_url: str, username: str) -> list[str]:
    """Every text column the conversation tables hold for the user."""
    connection = await asyncpg.connect(database_url)
    try:
        rows = await connection.fetch(
            """SELECT m.content FROM messages m JOIN scopes s ON s.id = m.scope_id
               WHERE s.username = $1
               UNION ALL
               SELECT cs.content FROM conversation_summaries cs
               JOIN conversations c ON c.id = cs.conversation_pk
               JOIN scopes s ON s.id = c.scope_id WHERE s.username = $1""",
            username,
        )
    finally:
        await connection.close()
    return [r["content"] for r in rows]


async def _conversation(memory: RunningServer, scope: dict[str, str], fillers: int) -> str:
    """A secret-bearing turn, then enough ordinary turns for it to be folded into the summary."""
    conversation = new_id()
    started = await memory.stub.StartTurn(
        pb.StartTurnRequest(**scope, conversation_id=conversation, content=USER_TEXT)
    )
    assert started.message.content == DetectSecretsFilter().redact(USER_TEXT).text or (
        not memory.server.settings.redact_secrets and started.message.content == USER_TEXT
    )
    await memory.stub.CompleteTurn(
        pb.CompleteTurnRequest(
            **scope,
            conversation_id=conversation,
            content=REPLY_TEXT,
            parent_id=started.message.message_id,
        )
    )
    for i in range(fillers):
        await memory.stub.AppendMessages(
            pb.AppendMessagesRequest(
                **scope,
                conversation_id=conversation,
                messages=[
                    pb.NewMessage(
                        role=pb.ROLE_USER,
                        content=f"Filler question {i} about the quarterly supplier review "
                        "and the open invoices of the Berlin subsidiary, grouped by region.",
                    ),
                    pb.NewMessage(
                        role=pb.ROLE_ASSISTANT,
                        content=f"Filler answer {i}: the Berlin subsidiary has several open "
                        "invoices; the regional breakdown follows in the usual table.",
                    ),
                ],
            )
        )
    return conversation


async def test_secrets_never_stored_nor_handed_back(
    start_server: ServerFactory,
    scope: dict[str, str],
    database_url: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    memory = await start_server(stm_context_tokens=512, fact_extract_async=False)
    conversation = await _conversation(memory, scope, fillers=12)

    [first, reply, *_] = await all_messages(memory.stub, scope, conversation)
    assert first.content == DetectSecretsFilter().redact(USER_TEXT).text
    assert reply.content == "Noted; I will not repeat [redacted: api key] anywhere."

    context = (
        await memory.stub.GetContext(
            pb.GetContextRequest(**scope, conversation_id=conversation, question="my keys?")
        )
    ).context
    assert context.summary, "the secret-bearing turn was folded into the summary"
    shown = [context.rendered, context.summary, *(m.content for m in context.recent_messages)]
    facts = (await memory.stub.ListFacts(pb.ListFactsRequest(**scope))).facts
    assert [f.text for f in facts] == ["Prefers concise bullet points"]
    rows = await _rows(database_url, scope["username"])
    assert len(rows) >= 2 + 24 + 1  # the messages and at least one summary
    assert any("[redacted: api key]" in r for r in rows)
    logged = "\n".join(f"{r.getMessage()} {r.exc_text or ''}" for r in caplog.records)
    assert "redacted 3 secret(s) before storing a message" in logged
    for secret in SECRETS:
        for text in [*shown, *rows, *(f.text for f in facts), logged]:
            assert secret not in text


async def test_a_retried_start_turn_with_a_secret_is_idempotent(
    memory: RunningServer, scope: dict[str, str]
) -> None:
    request = pb.StartTurnRequest(
        **scope, conversation_id=new_id(), content=USER_TEXT, message_id=new_id("msg")
    )
    first = await memory.stub.StartTurn(request)
    again = await memory.stub.StartTurn(request)
    assert again.message.message_id == first.message.message_id
    assert again.message.content == first.message.content


async def test_verbatim_setting_keeps_messages_but_not_facts(
    start_server: ServerFactory, scope: dict[str, str], database_url: str
) -> None:
    memory = await start_server(redact_secrets=False, fact_extract_async=False)
    conversation = await _conversation(memory, scope, fillers=0)
    [first, reply] = await all_messages(memory.stub, scope, conversation)
    assert (first.content, reply.content) == (USER_TEXT, REPLY_TEXT)
    rows = await _rows(database_url, scope["username"])
    assert USER_TEXT in rows
    facts = (await memory.stub.ListFacts(pb.ListFactsRequest(**scope))).facts
    assert [f.text for f in facts] == ["Prefers concise bullet points"]


def test_the_gates_lose_no_hit_on_any_sample() -> None:
    # The filter skips detectors on lines that cannot hold their secrets; on every sample and
    # every benign text, running all detectors on every line finds exactly the same.
    scrubber = DetectSecretsFilter()
    texts = [f"{BEFORE} {s.sentence}\n{AFTER}" for s in SECRET_SAMPLES] + list(BENIGN)
    for text in texts:
        for line in text.split("\n"):
            everything = {
                *scrubber._pattern_hits(line, 0),
                *scrubber._password_hits(line, 0),
                *scrubber._keyword_hits(line, 0),
                *scrubber._card_hits(line, 0),
                *scrubber._entropy_hits(line, 0),
            }
            assert set(scrubber._line_hits(line, 0)) == everything, line


async def test_imported_messages_are_redacted_and_reimport_is_skipped(
    memory: RunningServer, scope: dict[str, str], database_url: str
) -> None:
    conversation = new_id()
    request = pb.AppendMessagesRequest(
        **scope,
        conversation_id=conversation,
        messages=[pb.NewMessage(role=pb.ROLE_USER, content=USER_TEXT, message_id="imp-1")],
    )
    first = await memory.stub.AppendMessages(request)
    again = await memory.stub.AppendMessages(request)
    assert (first.inserted, again.inserted, again.skipped) == (1, 0, 1)
    [stored] = await all_messages(memory.stub, scope, conversation)
    assert stored.content == DetectSecretsFilter().redact(USER_TEXT).text
    rows = await _rows(database_url, scope["username"])
    assert len(rows) == 1 and all(secret not in rows[0] for secret in SECRETS)


async def test_a_secret_in_a_context_question_never_reaches_the_embedder(
    start_server: ServerFactory,
    fresh_database_url: str,
    fake_embeddings: FakeEmbeddings,
    scope: dict[str, str],
) -> None:
    # GetContext stores nothing, but recall embeds its question: with a remote embedder the
    # question leaves the service, so it is redacted first, like a stored message.
    memory = await start_server(
        database_url=fresh_database_url,
        embedding_base_url=fake_embeddings.base_url,
        embedding_model="fake-embed",
        embedding_dimension=fake_embeddings.dimension,
        fact_extract_async=False,
    )
    await memory.stub.AddFact(pb.AddFactRequest(**scope, text="Prefers concise bullet points"))
    before = len(fake_embeddings.requests)
    reply = await memory.stub.GetContext(
        pb.GetContextRequest(
            **scope, conversation_id=new_id(), question=f"Is {API_KEY} still my key?"
        )
    )
    assert API_KEY not in reply.context.rendered
    sent = json.dumps([r["body"] for r in fake_embeddings.requests[before:]])
    assert "[redacted: api key]" in sent  # the question was embedded, redacted
    assert API_KEY not in sent
    # So are the searches' (SearchFacts, SearchEpisodes: the MCP server's search tool).
    before = len(fake_embeddings.requests)
    query = f"which key is {API_KEY}"
    await memory.stub.SearchFacts(pb.SearchFactsRequest(**scope, query=query, threshold=0))
    await memory.stub.SearchEpisodes(pb.SearchEpisodesRequest(**scope, query=query, threshold=0))
    sent = json.dumps([r["body"] for r in fake_embeddings.requests[before:]])
    assert "[redacted: api key]" in sent and API_KEY not in sent
