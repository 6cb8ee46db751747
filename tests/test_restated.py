"""A state said again in other words is not learned twice (issue 30, item 5; R6 of
bench/fact_quality/RULES.md): the reconciler's `restated_at`, on the real MiniLM model, and on
a real server's learning path, where precise facts turn it on."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from test_probe import learned_facts
from test_reconcile import MODEL  # the real MiniLM model

from memory_server.extraction.event_dates import DateparserEvents
from memory_server.memory.facts.meaning import RESTATED_AT
from memory_server.memory.facts.model import Candidate, Decision, FactKind, LiveFact
from memory_server.memory.facts.reconcile import SimilarityReconciler
from memory_server.memory.time.event_time import said_when

from conftest import ServerFactory

OTHER, PREFERENCE = FactKind.OTHER, FactKind.PREFERENCE
SAID = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


async def _decide(
    text: str, known: str, *, kind: FactKind = OTHER, restated_at: float | None = RESTATED_AT
) -> tuple[Decision, str]:
    """The decision on `text` (dated as said at SAID) with `known` the scope's one live fact."""
    [candidate] = await said_when([Candidate(text, kind)], SAID, DateparserEvents())
    reconciler = SimilarityReconciler(MODEL, restated_at=restated_at)
    [decided] = await reconciler.reconcile([candidate], [LiveFact("f1", "v1", known, kind)])
    return decided.decision, decided.target_fact_id


@pytest.mark.parametrize(
    ("known", "text"),
    [
        ("Dancing brings them joy", "Dancing makes them so happy, and they love sharing it"),
        ("Just joined a fire-fighting brigade", "Is part of the fire-fighting brigade"),
        ("Started doing aerial yoga", "Enjoys aerial yoga"),
    ],
)
async def test_the_same_state_in_other_words_is_known_already(known: str, text: str) -> None:
    assert await _decide(text, known) == (Decision.NONE, "f1")
    # Without the cut-off (precise facts off) it is a second fact, as before.
    assert await _decide(text, known, restated_at=None) == (Decision.ADD, "")


@pytest.mark.parametrize(
    ("known", "text"),
    [
        # A dated candidate is a new event, however similar.
        ("Went to an LGBTQ+ pride parade last week", "Went to a pride parade last Friday"),
        # What the user likes, of another thing.
        ("Likes jazz", "Likes blues"),
        ("Loves coconut milk", "Loves almond milk"),
        # A short fact naming another thing.
        ("Has 3 cats", "Has 3 dogs"),
        # A new name or figure.
        ("Won their second tournament", "Won their second tournament in Tampa"),
    ],
)
async def test_a_new_event_thing_or_value_is_a_new_fact(known: str, text: str) -> None:
    decision, _ = await _decide(text, known)
    assert decision is Decision.ADD


async def test_a_changed_stance_is_never_taken_for_a_restatement() -> None:
    decision, target = await _decide("Doesn't like jazz", "Likes jazz", kind=PREFERENCE)
    assert (decision, target) == (Decision.UPDATE, "f1")


def test_the_cut_off_lies_between_related_and_duplicate() -> None:
    with pytest.raises(ValueError, match="restated_at"):
        SimilarityReconciler(MODEL, restated_at=0.95)
    with pytest.raises(ValueError, match="restated_at"):
        SimilarityReconciler(MODEL, restated_at=0.3)


SAID_TWICE = ("I just joined a fire-fighting brigade.", "I'm part of the fire-fighting brigade.")


async def test_the_learning_path_keeps_one_fact_for_a_state_said_twice(
    start_server: ServerFactory, scope: dict[str, str]
) -> None:
    precise = await start_server(fact_extract_async=False)
    assert await learned_facts(precise, scope, *SAID_TWICE) == ["Joined a fire-fighting brigade"]


async def test_without_precise_facts_both_are_kept(
    start_server: ServerFactory, scope: dict[str, str]
) -> None:
    loose = await start_server(fact_extract_async=False, ltm_precise_facts=False)
    assert await learned_facts(loose, scope, *SAID_TWICE) == [
        "Is part of the fire-fighting brigade",
        "Joined a fire-fighting brigade",
    ]
