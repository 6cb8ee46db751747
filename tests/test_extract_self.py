"""The offline extractor's self statements (memory/learning/self_statements.py): what the user
says of their own life outside the rule forms is kept close to their words; chit-chat, the listener,
pointers without what they point at, questions, hedges, promises and someone else's life
store nothing. Then the learning path over gRPC: provenance, no duplicate on a restatement,
and `ltm_self_statements` off."""

from __future__ import annotations

import pytest
from test_extract_world import _live, _say

from memory_client.v1 import memory_pb2 as pb
from memory_server.memory.learning.extract import RuleExtractor
from memory_server.memory.learning.self_statements import meaningful_words, self_statements
from memory_server.memory.ports import ExtractionInput

from conftest import ServerFactory, assert_eventually, new_id

EXTRACTOR = RuleExtractor()
RULES_ONLY = RuleExtractor(self_statements=False)


def _texts(message: str, extractor: RuleExtractor = EXTRACTOR) -> list[str]:
    return [c.text for c in extractor.extract_sync(ExtractionInput(message, ""))]


KEPT: list[tuple[str, list[str]]] = [
    ("Pottery is a huge part of my life.", ["Pottery is a huge part of their life"]),
    (
        "Volunteering at the animal shelter has taught me patience.",
        ["Volunteering at the animal shelter has taught them patience"],
    ),
    (
        "We usually watch a few movies together at Thanksgiving.",
        ["Usually watches a few movies together at Thanksgiving"],
    ),
    (
        "Writing short stories keeps me sane during exams.",
        ["Writing short stories keeps them sane during exams"],
    ),
    (
        "Maria, I learn a lot from my own struggles with anxiety.",
        ["Learns a lot from their own struggles with anxiety"],
    ),
    (
        "We didn't expect our garden to grow so many tomatoes.",
        ["Didn't expect their garden to grow so many tomatoes"],
    ),
    # What the user used to do is a fact of their past; "I know X" states X.
    (
        "I used to compete in dance competitions as a teenager.",
        ["Used to compete in dance competitions as a teenager"],
    ),
    (
        "I know hard work is what got me this far in my career.",
        ["Knows hard work is what got them this far in their career"],
    ),
    # "today" dates what happened; it is no one-off instruction here.
    (
        "I was bored, so I took my turtles out for a walk today.",
        ["Was bored, so they took their turtles out for a walk today"],
    ),
    # Greetings and small talk around it are dropped, the statement kept.
    (
        "Hey! Long time no talk. I've been swamped with my new bakery business.",
        ["Has been swamped with their new bakery business"],
    ),
    # A sentence that opens with a pointer is read with the one before, and replaces its fact.
    (
        "Painting is my escape. It helps me relax after work.",
        ["Painting is their escape. It helps them relax after work"],
    ),
    # Only the sentence right before: a pointer does not point at another pointer.
    (
        "Baking bread is my weekend ritual. It calms me down. It's also cheaper than the shop.",
        ["Baking bread is their weekend ritual. It calms them down"],
    ),
    # A part that says something on its own, when the whole does not.
    (
        "My garden is my favourite place in the city - your roses are lovely too.",
        ["Their garden is their favourite place in the city"],
    ),
]

NOT_KEPT = [
    "I'm so proud of you!",  # the listener
    "You've always been there for me.",
    "I'm glad my garden makes you smile.",
    "Thanks, that means a lot to me.",  # small talk
    "Sorry I haven't been around much lately.",
    "Trust me, my hometown is amazing!",
    "It's been ages since we last talked about my plans.",
    "I agree, my mornings are busy too.",  # a reaction of the moment
    "I had a great time.",  # says nothing
    "It helps me relax.",  # a pointer with nothing before it
    "That's my dog.",
    "Yep, John. These reminders help us stay motivated.",  # nothing said before to point at
    "That's great. It gives me hope.",
    "Check out this pic of my garden.",  # to the listener
    "Show me the pottery classes near my home.",
    "Let's grab coffee with our friends next week.",  # a suggestion, a promise, an ability
    "I'll send my recipe to the group.",
    "I can finally swim across the lake.",
    "My sister went to a pottery class with me.",  # someone else's life
    "Our kids love the beach near my parents' place.",
    "He told me my paintings are beautiful.",  # reported words
    "I think my painting style is changing.",  # a hedge
    "If I had more time, my garden would be bigger.",  # a hypothetical
    "Is pottery a big part of my life?",  # a question
    "I installed the new version of my notes app.",  # the moment's work
    "My query runs slowly on the big graph.",
]


@pytest.mark.parametrize(("message", "expected"), KEPT, ids=[m[:50] for m, _ in KEPT])
def test_what_the_user_says_of_their_life_is_kept(message: str, expected: list[str]) -> None:
    assert _texts(message) == expected
    assert _texts(message, RULES_ONLY) == []  # none of these is a rule form


@pytest.mark.parametrize("message", NOT_KEPT, ids=[m[:50] for m in NOT_KEPT])
def test_chit_chat_and_other_peoples_lives_store_nothing(message: str) -> None:
    assert _texts(message) == []


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        # An irregular past takes no "-s" ("Forgots their umbrella" was kept).
        ("I forgot my umbrella at the office yesterday.", "Forgot their umbrella"),
        ("I drew a portrait of my dog last weekend.", "Drew a portrait of their dog"),
        ("I fed the ducks at the lake near my house last Sunday.", "Fed the ducks"),
        # The present still does.
        ("I forget names all the time at work.", "Forgets names all the time"),
        ("I always draw portraits of my dogs on Sundays.", "Always draws portraits"),
    ],
)
def test_the_verb_keeps_its_tense_in_third_person(message: str, expected: str) -> None:
    [text] = _texts(message)
    assert text.startswith(expected), text


def test_a_rule_form_is_not_kept_twice() -> None:
    """A sentence a rule form read gives the rule's fact only, never a second wording."""
    assert _texts("I moved to Lisbon last month.") == ["Moved to Lisbon last month"]
    assert _texts("My manager is Priya Raman.") == ["Manager is Priya Raman"]


def test_a_restatement_of_a_recalled_fact_is_dropped() -> None:
    recalled = ("Pottery is a huge part of their life",)
    turn = ExtractionInput("Pottery is a huge part of my life.", "", recalled)
    assert EXTRACTOR.extract_sync(turn) == []


def test_meaningful_words_and_the_limits() -> None:
    assert meaningful_words("I had a great time") == []
    assert meaningful_words("Pottery is a huge part of my life") == [
        "pottery",
        "huge",
        "part",
        "life",
    ]
    assert self_statements("I love pottery.") == []  # two content words: below the floor
    long = "I spent my summer " + " ".join(["hiking in the hills"] * 8) + "."
    assert self_statements(long) == []  # over MAX_WORDS


# --- the learning path over gRPC --------------------------------------------------------------


async def test_a_self_statement_is_learned_with_its_message_and_recalled_elsewhere(
    start_server: ServerFactory, scope: dict[str, str]
) -> None:
    memory = await start_server(fact_extract_async=False)
    first, second = new_id(), new_id()
    await _say(memory, scope, first, "Thanks so much! I'm so proud of you.")
    assert await _live(memory, scope) == []
    said = await _say(memory, scope, first, "Pottery is a huge part of my life.")
    [kept] = await _live(memory, scope)
    assert (kept.text, kept.kind, kept.extractor) == (
        "Pottery is a huge part of their life",
        "other",
        "rules-v1",
    )
    assert (kept.conversation_id, kept.message_id) == (first, said)

    # Said again in another chat: known already, nothing new and the provenance unchanged.
    await _say(memory, scope, second, "Pottery is a huge part of my life.")
    [same] = await _live(memory, scope)
    assert (same.fact_id, same.version_id, same.message_id) == (
        kept.fact_id,
        kept.version_id,
        said,
    )

    async def recalled() -> bool:  # once the outbox has indexed it
        found = await memory.stub.SearchFacts(
            pb.SearchFactsRequest(**scope, query="Which hobby matters to me?", top_k=3, threshold=0)
        )
        return [r.fact.fact_id for r in found.results if r.vector_score > 0] == [kept.fact_id]

    await assert_eventually(recalled, what="the self statement recalled by meaning")


async def test_the_setting_off_keeps_only_the_rule_forms(
    start_server: ServerFactory, scope: dict[str, str]
) -> None:
    memory = await start_server(fact_extract_async=False, ltm_self_statements=False)
    conversation = new_id()
    await _say(memory, scope, conversation, "Pottery is a huge part of my life.")
    assert await _live(memory, scope) == []
    await _say(memory, scope, conversation, "I moved to Lisbon last month.")
    assert [f.text for f in await _live(memory, scope)] == ["Moved to Lisbon last month"]
