"""The fact probe (memory/facts/probe.py; RULES.md, "The probe"): small talk that the word rules
let through is not learned, what a GraphRAG user tells of their work is, on the real MiniLM
model and through a real server's learning path."""

from __future__ import annotations

import logging

import pytest
from test_reconcile import MODEL  # the real MiniLM model

from memory_client.v1 import memory_pb2 as pb
from memory_server.memory.facts.model import Candidate, Decision, FactKind, LiveFact
from memory_server.memory.facts.probe import FactProbe
from memory_server.memory.facts.reconcile import SimilarityReconciler

from conftest import RunningServer, ServerFactory, new_id
from fake_openai import FakeEmbeddings

PREFERENCE, GOAL, IDENTITY, OTHER = (
    FactKind.PREFERENCE,
    FactKind.GOAL,
    FactKind.IDENTITY,
    FactKind.OTHER,
)


def _probe() -> FactProbe:
    probe = FactProbe.for_model(MODEL.model_name)
    assert probe is not None, "the packaged probe is trained on the offline model"
    return probe


def test_the_probe_holds_only_for_the_model_it_was_trained_on() -> None:
    probe = _probe()
    assert len(probe.weights) == MODEL.dimension == 384
    assert 0.0 < probe.keep_at < 1.0
    assert FactProbe.for_model("text-embedding-3-small") is None
    with pytest.raises(ValueError, match="dimension"):
        probe.good([0.1] * 1536)


@pytest.mark.parametrize(
    "text",
    [
        "Prefers concise bullet points",
        "Prefers tables over charts",
        "Wants to learn GSQL",
        "Goal is to migrate the fraud graph to TigerGraph 4.2",
        "Is working on a fraud detection graph for Acme bank",
        "Is preparing a demo of the supply chain graph for Friday",
        "Hates long explanations",
        "Is allergic to peanuts",
        "Pottery is a huge part of their life",
    ],
)
async def test_what_a_user_tells_of_their_work_and_life_is_good(text: str) -> None:
    [vector] = await MODEL.embed([text])
    assert _probe().keeps(vector), text


@pytest.mark.parametrize(
    "text",
    [
        "Loves the color and texture",
        "Is excited to explore the nature",
        "Loves helping others",
        "Is so grateful for their supportive friends",
    ],
)
async def test_small_talk_is_not(text: str) -> None:
    [vector] = await MODEL.embed([text])
    assert not _probe().keeps(vector), text


async def _decide(candidate: Candidate, probe: FactProbe | None) -> Decision:
    reconciler = SimilarityReconciler(MODEL, probe=probe)
    live = [LiveFact("f1", "v1", "Works in the fraud team", IDENTITY)]
    [decided] = await reconciler.reconcile([candidate], live)
    return decided.decision


@pytest.mark.parametrize(
    ("candidate", "judged"),
    [
        (Candidate("Loves the color and texture", PREFERENCE), True),
        (Candidate("Is excited to explore the nature", GOAL), True),
        (Candidate("Loves helping others", OTHER, self_statement=True), True),
        # A rule form's event or identity, an instruction, a retraction: not the probe's.
        (Candidate("Loves helping others", OTHER), False),
        (Candidate("Loves helping others", IDENTITY), False),
        (Candidate("Loves the color and texture", PREFERENCE, standing=True), False),
    ],
)
async def test_the_reconciler_drops_what_the_probe_judges_small_talk(
    candidate: Candidate, judged: bool
) -> None:
    probe = _probe()
    assert probe.judges(candidate) is judged
    assert await _decide(candidate, probe) is (Decision.NONE if judged else Decision.ADD)
    assert await _decide(candidate, None) is Decision.ADD


async def learned_facts(memory: RunningServer, scope: dict[str, str], *said: str) -> list[str]:
    """The live facts of `scope` after each message is a turn of its own conversation."""
    for message in said:
        conversation = new_id()
        started = await memory.stub.StartTurn(
            pb.StartTurnRequest(**scope, conversation_id=conversation, content=message)
        )
        await memory.stub.CompleteTurn(
            pb.CompleteTurnRequest(
                **scope,
                conversation_id=conversation,
                content="Nice!",
                parent_id=started.message.message_id,
            )
        )
    listed = await memory.stub.ListFacts(pb.ListFactsRequest(**scope))
    return sorted(f.text for f in listed.facts)


SAID = ("I love the color and texture.", "I'm allergic to peanuts.")


async def test_the_learning_path_keeps_the_fact_and_not_the_small_talk(
    start_server: ServerFactory, scope: dict[str, str]
) -> None:
    memory = await start_server(fact_extract_async=False)
    assert await learned_facts(memory, scope, *SAID) == ["Is allergic to peanuts"]


async def test_without_precise_facts_the_probe_is_off(
    start_server: ServerFactory, scope: dict[str, str]
) -> None:
    memory = await start_server(fact_extract_async=False, ltm_precise_facts=False)
    assert await learned_facts(memory, scope, *SAID) == [
        "Is allergic to peanuts",
        "Loves the color and texture",
    ]


async def test_with_another_embedding_model_only_the_word_rules_judge(
    start_server: ServerFactory,
    fresh_database_url: str,
    scope: dict[str, str],
    fake_embeddings: FakeEmbeddings,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The probe's weights and the restatement cut-off are the offline model's: a server on a
    remote model (the loopback stand-in) learns without them, and says so."""
    caplog.set_level(logging.INFO, logger="memory_server.long_term")
    memory = await start_server(
        database_url=fresh_database_url,
        fact_extract_async=False,
        embedding_base_url=fake_embeddings.base_url,
        embedding_model="fake-embed",
        embedding_dimension=fake_embeddings.dimension,
    )
    assert await learned_facts(memory, scope, *SAID) == [
        "Is allergic to peanuts",
        "Loves the color and texture",
    ]
    assert any("only the word rules" in r.getMessage() for r in caplog.records)
