"""A question's common words (those in more than ltm_common_word_share of the scope's facts, and
in at least MIN_FACTS of them) are left out of the text recall embeds; the lexical signal still
sees the whole question. Those written with a capital are the question's subjects: a fact that
names none of them scores ltm_off_subject_weight times what it would. Real PostgreSQL (its
English stemmer decides what a word is), the embedder double recording exactly what the server
embedded, and the real MiniLM embedder for the ranking it changes."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from memory_client.v1 import memory_pb2 as pb
from memory_server.memory.identity import Scope
from memory_server.memory.ports import AsOf
from memory_server.memory.recall.common_words import (
    MIN_FACTS,
    CommonWords,
    naming,
    subjects_of,
    without,
    words,
)
from memory_server.store.facts import PostgresFactStore

from conftest import RunningServer, ServerFactory, outbox_caught_up
from fake_openai import FakeEmbeddings

# Twelve facts that all name Caroline, two that name Melanie.
CAROLINE = [
    f"Caroline: {text}"
    for text in (
        "I went to the LGBTQ support group yesterday",
        "I'm thinking about adopting a child",
        "my mentor helped me a lot this year",
        "we had a picnic by the river",
        "I started a new counseling course",
        "the conference was inspiring",
        "I read a great book about identity",
        "my friends threw me a birthday party",
        "I volunteer at the shelter on weekends",
        "I love hiking in the mountains",
        "my grandma gave me a necklace",
        "I spoke at my school about transgender rights",
    )
]
MELANIE = [
    "Melanie: I painted a sunrise over the lake last week",
    "Melanie: my kids loved the dinosaur exhibit",
]
FACTS = frozenset(CAROLINE + MELANIE)
QUESTION = "What did Caroline's friend Melanie paint?"


def test_words_and_without() -> None:
    assert words("What did Caroline's friend paint, Caroline?") == [
        "What",
        "did",
        "Caroline's",
        "friend",
        "paint",
        "Caroline",
    ]
    assert without(QUESTION, {"Caroline's"}) == "What did friend Melanie paint?"
    assert without("Caroline?", {"Caroline"}) == "Caroline?"  # nothing would be left
    assert without(QUESTION, set()) == QUESTION
    assert len(words(" ".join(f"w{i}" for i in range(500)))) == 64


def test_subjects_and_naming() -> None:
    assert subjects_of(["Caroline's", "python", "Melanie"]) == ("Caroline's", "Melanie")
    pattern = naming(["Caroline's", "Melanie"])
    assert pattern is not None
    for text in ("Caroline: hi", "I met caroline", "Caroline’s painting", "ask MELANIE's kids"):
        assert pattern.search(text), text
    for text in ("Carolines", "Carol: hi", "Melanies"):
        assert not pattern.search(text), text
    assert naming([]) is None


async def _embedded_queries(
    memory: RunningServer, fake: FakeEmbeddings, scope: dict[str, str], query: str, **kw: object
) -> list[str]:
    before = len(fake.requests)
    await memory.stub.SearchFacts(
        pb.SearchFactsRequest(**scope, query=query, top_k=5, threshold=0, **kw)  # type: ignore[arg-type]
    )
    # The outbox embeds the facts meanwhile, through the same endpoint.
    return [t for r in fake.requests[before:] for t in r["body"]["input"] if t not in FACTS]


async def _fake_embedding_server(
    start_server: ServerFactory, url: str, fake: FakeEmbeddings, **overrides: object
) -> RunningServer:
    """A server on its own database whose embedder is the double (it records what it embeds)."""
    return await start_server(
        database_url=url,
        embedding_base_url=fake.base_url,
        embedding_model="fake-embed",
        embedding_dimension=fake.dimension,
        embedding_cache_size=0,
        fact_extract_async=False,
        **overrides,
    )


@pytest.fixture
async def remote(
    start_server: ServerFactory, fresh_database_url: str, fake_embeddings: FakeEmbeddings
) -> RunningServer:
    return await _fake_embedding_server(start_server, fresh_database_url, fake_embeddings)


async def test_the_question_is_embedded_without_the_scopes_common_words(
    remote: RunningServer, fake_embeddings: FakeEmbeddings, scope: dict[str, str]
) -> None:
    # Below MIN_FACTS facts nothing is common: the question is embedded whole.
    for text in CAROLINE[: MIN_FACTS - 1]:
        await remote.stub.AddFact(pb.AddFactRequest(**scope, text=text))
    assert await _embedded_queries(remote, fake_embeddings, scope, QUESTION) == [QUESTION]
    added_at = datetime.now(UTC)
    for text in CAROLINE[MIN_FACTS - 1 :] + MELANIE:
        await remote.stub.AddFact(pb.AddFactRequest(**scope, text=text))
    # 12 of 14 facts hold "carolin" (stemmed: "Caroline's" is the same word); "Melanie" is
    # in 2, "friend" in 1, "paint" in 1.
    assert await _embedded_queries(remote, fake_embeddings, scope, QUESTION) == [
        "What did friend Melanie paint?"
    ]
    assert await _embedded_queries(remote, fake_embeddings, scope, "Caroline sunrise") == [
        "sunrise"
    ]
    # As of a time when only nine facts were believed: nothing is common then.
    earlier = Timestamp()
    earlier.FromDatetime(added_at - timedelta(milliseconds=1))
    got = await _embedded_queries(
        remote,
        fake_embeddings,
        scope,
        "Caroline sunrise",
        as_of_transaction_time=earlier,
    )
    assert got == ["Caroline sunrise"]


async def test_share_zero_embeds_the_question_whole(
    start_server: ServerFactory,
    fresh_database_url: str,
    fake_embeddings: FakeEmbeddings,
    scope: dict[str, str],
) -> None:
    memory = await _fake_embedding_server(
        start_server, fresh_database_url, fake_embeddings, ltm_common_word_share=0
    )
    for text in CAROLINE + MELANIE:
        await memory.stub.AddFact(pb.AddFactRequest(**scope, text=text))
    assert await _embedded_queries(memory, fake_embeddings, scope, QUESTION) == [QUESTION]
    sent = json.dumps([r["body"] for r in fake_embeddings.requests])
    assert "What did friend Melanie paint?" not in sent


async def test_the_lexical_signal_still_weighs_the_common_word(
    memory: RunningServer, scope: dict[str, str]
) -> None:
    # The real embedder: "Caroline" is left out of the embedding, and a fact that matches the
    # question only by it keeps its (small) lexical vote.
    for text in CAROLINE + MELANIE:
        await memory.stub.AddFact(pb.AddFactRequest(**scope, text=text))

    await outbox_caught_up(memory)
    found = await memory.stub.SearchFacts(
        pb.SearchFactsRequest(**scope, query="Caroline sunrise painting", top_k=14, threshold=0)
    )
    by_text = {r.fact.text: r for r in found.results}
    assert found.results[0].fact.text == MELANIE[0]
    assert all(by_text[t].lexical_score > 0 for t in CAROLINE if t in by_text)


async def test_a_fact_that_names_none_of_the_questions_subjects_is_weighed_down(
    remote: RunningServer,
    start_server: ServerFactory,
    fresh_database_url: str,
    fake_embeddings: FakeEmbeddings,
    scope: dict[str, str],
) -> None:
    # A second server on the same database that weighs every fact alike.
    alike = await _fake_embedding_server(
        start_server, fresh_database_url, fake_embeddings, ltm_off_subject_weight=1
    )
    possessive = "Melanie: Caroline's painting of the lake is lovely"
    for text in [*CAROLINE, *MELANIE, possessive]:
        await remote.stub.AddFact(pb.AddFactRequest(**scope, text=text))
    await outbox_caught_up(remote)

    async def scores(memory: RunningServer, query: str) -> dict[str, float]:
        found = await memory.stub.SearchFacts(
            pb.SearchFactsRequest(**scope, query=query, top_k=20, threshold=0)
        )
        return {r.fact.text: r.score for r in found.results}

    # "Caroline" is in 13 of 15 facts: common, and written with a capital, the subject.
    weighed = await scores(remote, "What did Caroline paint?")
    plain = await scores(alike, "What did Caroline paint?")
    assert set(MELANIE) <= plain.keys() and possessive in plain
    for text, score in plain.items():
        expected = score if text in CAROLINE or text == possessive else score * 0.8
        assert weighed[text] == pytest.approx(expected), text
    assert weighed[MELANIE[0]] < plain[MELANIE[0]]
    # Written in lower case the word is still left out of the embedding, but names no subject.
    assert await scores(remote, "what did caroline paint?") == pytest.approx(
        await scores(alike, "what did caroline paint?")
    )


async def test_a_words_stems_are_asked_of_postgresql_once(
    memory: RunningServer, scope: dict[str, str], database_url: str
) -> None:
    for text in CAROLINE + MELANIE:
        await memory.stub.AddFact(pb.AddFactRequest(**scope, text=text))

    class Counting(PostgresFactStore):
        asked: list[list[str]] = []

        async def lexemes_of(
            self, words: Sequence[str], *, timeout_s: float | None = None
        ) -> dict[str, list[str]]:
            self.asked.append(list(words))
            return await super().lexemes_of(words, timeout_s=timeout_s)

    async with asyncpg.create_pool(database_url, min_size=1, max_size=2) as pool:
        store = Counting(pool)
        common = CommonWords(store, 0.2)
        who = Scope(scope["username"], scope["graphname"])
        first = await common.question(who, QUESTION, AsOf())
        again = await common.question(who, QUESTION, AsOf())
        other = await common.question(who, "What did Caroline's friend sing?", AsOf())
    assert first == again
    assert first.text == "What did friend Melanie paint?" and first.subjects == ("Caroline's",)
    assert other.text == "What did friend sing?"
    # The second question asked nothing; the third only its new word.
    assert store.asked == [words(QUESTION), ["sing"]]
