"""The offline reconciler against the real MiniLM model: ADD / UPDATE / DELETE / NONE."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from memory_server.embedding.minilm import MiniLMBackend
from memory_server.memory.facts.model import Candidate, Decision, FactKind, LiveFact
from memory_server.memory.facts.reconcile import SimilarityReconciler
from memory_server.memory.facts.shape import clashes, shape_of
from memory_server.memory.learning.extract import RuleExtractor
from memory_server.memory.ports import Embedder, ExtractionInput, Reconciler

P, D, G, ID = FactKind.PREFERENCE, FactKind.DECISION, FactKind.GOAL, FactKind.IDENTITY
ADD, UPDATE, DELETE, NONE = Decision.ADD, Decision.UPDATE, Decision.DELETE, Decision.NONE


class MiniLMEmbedder:
    """The production default model, called directly (the pool only adds batching across
    scopes, which these tests do not need)."""

    def __init__(self) -> None:
        self._backend = MiniLMBackend()

    @property
    def model_name(self) -> str:
        return self._backend.model_name

    @property
    def dimension(self) -> int:
        return self._backend.dimension

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return self._backend.embed_batch(texts)


class RecordingEmbedder:
    """Records every `embed` call of the embedder it wraps."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.calls: list[list[str]] = []

    @property
    def model_name(self) -> str:
        return self.inner.model_name

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return await self.inner.embed(texts)


MODEL: Embedder = MiniLMEmbedder()  # the one line to change to test another embedder


def reconciler(embedder: Embedder = MODEL) -> SimilarityReconciler:
    return SimilarityReconciler(embedder)


def live(*facts: tuple[str, FactKind]) -> list[LiveFact]:
    return [LiveFact(f"f{i}", f"v{i}", text, kind) for i, (text, kind) in enumerate(facts)]


async def decide(
    candidates: Sequence[Candidate], facts: Sequence[LiveFact]
) -> list[tuple[Decision, str, str]]:
    """(decision, target, candidate text) per candidate; also checks the order is kept."""
    checked: Reconciler = reconciler()
    out = await checked.reconcile(candidates, facts)
    assert [d.candidate for d in out] == list(candidates)
    return [(d.decision, d.target_fact_id, d.candidate.text) for d in out]


async def turn(message: str, facts: Sequence[LiveFact]) -> list[tuple[Decision, str, str]]:
    """Extract from a user message with the rule extractor, then reconcile."""
    candidates = await RuleExtractor().extract(ExtractionInput(message, ""))
    assert candidates, "the message should yield a candidate"
    return await decide(candidates, facts)


# The scenarios a user would recognise, from the message to the decision.
async def test_a_changed_preference_updates_it() -> None:
    facts = live(("Prefers coffee", P), ("Works at Acme", ID))
    assert await turn("I now prefer tea.", facts) == [(UPDATE, "f0", "Prefers tea")]


async def test_a_changed_verbosity_updates_that_fact() -> None:
    facts = live(
        ("Wants the assistant to always answer in French", P),
        ("Prefers concise bullet points", P),
        ("Likes jazz", P),
    )
    message = "Actually I prefer long explanations now."
    assert await turn(message, facts) == [(UPDATE, "f1", "Prefers long explanations")]


async def test_a_clash_on_a_slot_updates_without_a_change_marker() -> None:
    facts = live(("Likes jazz", P), ("Prefers concise bullet points", P))
    candidate = Candidate("Prefers long explanations", P)
    assert not candidate.change
    assert await decide([candidate], facts) == [(UPDATE, "f1", "Prefers long explanations")]


@pytest.mark.parametrize(
    ("old", "message", "new"),
    [
        ("Timezone is CET", "My timezone is PST.", "Timezone is PST"),
        ("Name is Sam", "My name is Samantha.", "Name is Samantha"),
        ("Favourite graph is Finance", "My favourite graph is Sales.", "Favourite graph is Sales"),
        ("Lives in Berlin", "I live in Lisbon.", "Lives in Lisbon"),
        (
            "Wants the assistant to always answer in French",
            "From now on always answer in English.",
            "Wants the assistant to always answer in English",
        ),
        (
            "Wants the assistant to always use emojis",  # 0.97 similar, yet a contradiction
            "Never use emojis.",
            "Wants the assistant to never use emojis",
        ),
        ("Likes jazz", "I hate jazz.", "Hates jazz"),
        ("Prefers Cypher", "I prefer GSQL over Cypher.", "Prefers GSQL over Cypher"),
    ],
)
async def test_slot_clashes_update(old: str, message: str, new: str) -> None:
    kind = ID if old.startswith(("Timezone", "Name", "Lives")) else P
    facts = live(("Is working on a fraud ring detection pipeline", G), (old, kind))
    assert await turn(message, facts) == [(UPDATE, "f1", new)]


async def test_forgetting_deletes() -> None:
    facts = live(("Prefers coffee", P), ("Likes jazz", P))
    assert await turn("Forget that I like jazz", facts) == [(DELETE, "f1", "Likes jazz")]
    assert await turn("I don't like jazz anymore.", facts) == [(DELETE, "f1", "Likes jazz")]
    assert await turn("Ignore what I said about coffee.", facts) == [(DELETE, "f0", "Coffee")]


async def test_forgetting_an_attribute_deletes_it() -> None:
    facts = live(("Likes jazz", P), ("Timezone is CET", ID))
    assert await turn("Forget my timezone.", facts) == [(DELETE, "f1", "Timezone")]


async def test_retracting_what_is_not_known_does_nothing() -> None:
    facts = live(("Likes jazz", P), ("Is working on a fraud ring detection pipeline", G))
    assert await turn("Forget that I like tea.", facts) == [(NONE, "", "Likes tea")]
    assert await decide([Candidate("Likes jazz", P, retraction=True)], []) == [
        (NONE, "", "Likes jazz")
    ]


async def test_a_retraction_never_hits_the_opposite_stance() -> None:
    # "Likes jazz" and "Dislikes jazz" are 0.80 similar; deleting the dislike would invert it.
    facts = live(("Dislikes jazz", P))
    assert await turn("I don't like jazz anymore.", facts) == [(NONE, "", "Likes jazz")]


async def test_retracting_twice_does_not_pick_a_second_victim() -> None:
    facts = live(("Likes jazz", P), ("Likes blues", P))
    retraction = Candidate("Likes jazz", P, retraction=True)
    assert await decide([retraction, retraction], facts) == [
        (DELETE, "f0", "Likes jazz"),
        (NONE, "f0", "Likes jazz"),
    ]


async def test_a_known_fact_is_none() -> None:
    facts = live(("Prefers concise bullet points", P), ("Is trying to learn GSQL", G))
    assert await turn("I prefer concise bullet points.", facts) == [
        (NONE, "f0", "Prefers concise bullet points")
    ]
    # Not the same words, but the same fact (cosine 0.95).
    assert await turn("I want to learn GSQL.", facts) == [(NONE, "f1", "Wants to learn GSQL")]
    # Same normalised text, even as another kind.
    assert await decide([Candidate("prefers concise  bullet points!", FactKind.OTHER)], facts) == [
        (NONE, "f0", "prefers concise  bullet points!")
    ]


async def test_an_unrelated_fact_is_added() -> None:
    facts = live(("Prefers coffee", P), ("Timezone is CET", ID))
    assert await turn("I'm a data engineer at Acme.", facts) == [
        (ADD, "", "Is a data engineer at Acme")
    ]
    # Likes are not exclusive: liking blues does not replace liking jazz.
    assert await decide([Candidate("Likes blues", P)], live(("Likes jazz", P))) == [
        (ADD, "", "Likes blues")
    ]


async def test_a_change_does_not_replace_a_fact_about_another_slot() -> None:
    facts = live(("Prefers concise answers", P))
    assert await turn("Actually I prefer answers in French.", facts) == [
        (ADD, "", "Prefers answers in French")
    ]


async def test_a_change_only_replaces_a_fact_of_the_same_kind() -> None:
    facts = live(("Prefers Cypher", P))  # 0.78 similar to the candidate
    candidate = Candidate("Decided to use Cypher", D, change=True)
    assert await decide([candidate], facts) == [(ADD, "", "Decided to use Cypher")]
    candidate = Candidate("Decided to use Cypher", P, change=True)
    assert await decide([candidate], facts) == [(UPDATE, "f0", "Decided to use Cypher")]


async def test_a_narrower_preference_does_not_replace_a_general_one() -> None:
    facts = live(("Prefers tables", P))
    candidate = Candidate("Prefers bullet points for summaries", P)
    assert await decide([candidate], facts) == [(ADD, "", candidate.text)]


class TestWithinOneBatch:
    async def test_two_identical_candidates(self) -> None:
        candidate = Candidate("Prefers tea", P)
        assert await decide([candidate, candidate], live(("Likes jazz", P))) == [
            (ADD, "", "Prefers tea"),
            (NONE, "", "Prefers tea"),
        ]

    async def test_a_later_candidate_supersedes_an_earlier_one(self) -> None:
        batch = [Candidate("Prefers coffee", P), Candidate("Prefers tea", P, change=True)]
        assert await decide(batch, []) == [(NONE, "", "Prefers coffee"), (ADD, "", "Prefers tea")]

    async def test_two_updates_of_one_live_fact_chain(self) -> None:
        facts = live(("Prefers milk", P))
        assert await turn("I prefer coffee. Actually I prefer tea now.", facts) == [
            (UPDATE, "f0", "Prefers coffee"),
            (UPDATE, "f0", "Prefers tea"),
        ]

    async def test_a_fact_updated_earlier_is_known_afterwards(self) -> None:
        facts = live(("Prefers coffee", P))
        batch = [Candidate("Prefers tea", P, change=True), Candidate("Prefers tea", P)]
        assert await decide(batch, facts) == [
            (UPDATE, "f0", "Prefers tea"),
            (NONE, "f0", "Prefers tea"),
        ]


class TestEmbedding:
    async def test_one_embed_call_for_a_reconcile(self) -> None:
        recorder = RecordingEmbedder(MODEL)
        facts = live(*((f"Likes band number {i}", P) for i in range(50)), ("Prefers coffee", P))
        batch = [
            Candidate("Prefers tea", P),
            Candidate("Prefers tea", P),
            Candidate("Name is Sam", ID),
        ]
        await reconciler(recorder).reconcile(batch, facts)
        assert len(recorder.calls) == 1
        # Each distinct text once.
        assert sorted(recorder.calls[0]) == sorted(
            {c.text for c in batch} | {f.text for f in facts}
        )

    async def test_precomputed_live_vectors_are_reused(self) -> None:
        facts = live(("Prefers coffee", P), ("Likes jazz", P), ("Timezone is CET", ID))
        embedded = await MODEL.embed([f.text for f in facts])
        # Any sequence will do (a store may hand back tuples or arrays).
        vectors = {f.version_id: tuple(v) for f, v in zip(facts, embedded, strict=True)}
        recorder = RecordingEmbedder(MODEL)
        batch = [
            Candidate("Prefers tea", P, change=True),
            Candidate("Likes jazz", P, retraction=True),
        ]
        decisions = await reconciler(recorder).reconcile(batch, facts, live_vectors=vectors)
        assert recorder.calls == [["Prefers tea", "Likes jazz"]]
        assert [(d.decision, d.target_fact_id) for d in decisions] == [
            (UPDATE, "f0"),
            (DELETE, "f1"),
        ]

    async def test_a_missing_or_wrongly_sized_vector_is_embedded(self) -> None:
        facts = live(("Prefers coffee", P), ("Likes jazz", P), ("Timezone is CET", ID))
        recorder = RecordingEmbedder(MODEL)
        vectors = {"v0": [0.1] * 7, "v1": (await MODEL.embed(["Likes jazz"]))[0]}
        await reconciler(recorder).reconcile(
            [Candidate("Prefers tea", P)], facts, live_vectors=vectors
        )
        assert recorder.calls == [["Prefers tea", "Prefers coffee", "Timezone is CET"]]

    async def test_vectors_are_looked_up_by_version(self) -> None:
        # A stale vector of another version must not stand in for this version's text.
        facts = live(("Prefers coffee", P))
        stale = {"f0": (await MODEL.embed(["Likes jazz"]))[0]}
        recorder = RecordingEmbedder(MODEL)
        await reconciler(recorder).reconcile(
            [Candidate("Prefers tea", P)], facts, live_vectors=stale
        )
        assert recorder.calls == [["Prefers tea", "Prefers coffee"]]

    async def test_no_candidates_no_call(self) -> None:
        recorder = RecordingEmbedder(MODEL)
        assert await reconciler(recorder).reconcile([], live(("Likes jazz", P))) == []
        assert recorder.calls == []


async def test_deterministic() -> None:
    facts = live(
        ("Prefers coffee", P),
        ("Likes jazz", P),
        ("Timezone is CET", ID),
        ("Prefers concise bullet points", P),
        ("Is working on a fraud ring detection pipeline", G),
    )
    message = (
        "I now prefer tea. Forget that I like jazz. My timezone is PST. I prefer concise bullet "
        "points. I'm learning GSQL. I prefer tea."
    )
    first = await turn(message, facts)
    assert [d for d, _, _ in first] == [UPDATE, DELETE, UPDATE, NONE, ADD]
    for _ in range(3):
        assert await turn(message, facts) == first


def test_thresholds_are_checked() -> None:
    for duplicate_at, related_at in ((0.5, 0.6), (1.1, 0.5), (0.9, 0.0)):
        with pytest.raises(ValueError):
            SimilarityReconciler(MODEL, duplicate_at=duplicate_at, related_at=related_at)


@pytest.mark.parametrize(
    ("a", "b", "clash"),
    [
        ("Prefers coffee", "Prefers tea", True),
        ("Prefers concise bullet points", "Prefers long explanations", True),
        ("Prefers bullet points", "Prefers tables", True),
        ("Wants the assistant to always answer in French", "Prefers answers in English", True),
        ("Wants the assistant to never use tables", "Prefers tables", True),
        ("Likes jazz", "Dislikes jazz", True),
        ("Timezone is CET", "Time zone is PST", True),
        ("Favorite graph is Finance", "My favourite graph is Sales", True),
        ("Job title is analyst", "Role is data engineer", True),
        ("Works at Acme", "Works for Initech", True),
        ("Wants to be called Sam", "Goes by Alex", True),
        ("Prefers GSQL over Cypher", "Prefers Cypher", True),
        ("Likes jazz", "Likes blues", False),
        ("Prefers coffee", "Prefers coffee", False),
        ("Prefers French press coffee", "Wants the assistant to always answer in English", False),
        ("Prefers tables", "Prefers bullet points for summaries", False),
        ("Prefers concise answers", "Prefers answers in French", False),
        ("Name is Sam", "Wants to be called Sammy", False),
        (
            "Wants the assistant to never use tables",
            "Wants the assistant to never use emojis",
            False,
        ),
        ("Timezone is CET", "Team is Risk Analytics", False),
        ("Is a data engineer at Acme", "Is a parent", False),
    ],
)
def test_slot_rules(a: str, b: str, clash: bool) -> None:
    assert clashes(shape_of(a), shape_of(b)) is clash
    assert clashes(shape_of(b), shape_of(a)) is clash


async def test_a_changed_value_updates_and_other_values_are_never_duplicates() -> None:
    facts = live(("Will use Postgres 14 for the pilot", D), ("Has 2 kids", ID))
    assert await decide([Candidate("Will use Postgres 16 for the pilot", D)], facts) == [
        (UPDATE, "f0", "Will use Postgres 16 for the pilot")
    ]
    assert await decide([Candidate("Has two kids", ID)], facts) == [(NONE, "f1", "Has two kids")]
    flights = live(("Their flight to Rome is AZ611", FactKind.OTHER))
    oslo = Candidate("Their flight to Oslo is SK1470", FactKind.OTHER)
    assert await decide([oslo], flights) == [(ADD, "", oslo.text)]


async def test_a_value_changed_within_one_turn_keeps_the_later_one() -> None:
    two, three = Candidate("Has 2 kids", ID), Candidate("Has 3 kids", ID)
    assert await decide([two, three], []) == [(NONE, "", "Has 2 kids"), (ADD, "", "Has 3 kids")]
