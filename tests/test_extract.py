"""The offline rule extractor: what it takes from a user's turn, and what it must leave alone."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from memory_server.memory.facts.model import Candidate, FactKind
from memory_server.memory.learning.extract import RuleExtractor
from memory_server.memory.ports import ExtractionInput, Extractor

P, D, G, ID, OT = (
    FactKind.PREFERENCE,
    FactKind.DECISION,
    FactKind.GOAL,
    FactKind.IDENTITY,
    FactKind.OTHER,
)
EXTRACTOR: Extractor = RuleExtractor()


def fact(text: str, kind: FactKind, *, change: bool = False) -> Candidate:
    return Candidate(text, kind, change=change)


def gone(text: str, kind: FactKind, *, change: bool = False) -> Candidate:
    return Candidate(text, kind, retraction=True, change=change)


async def extract(
    user: str, assistant: str = "", recalled: tuple[str, ...] = ()
) -> list[Candidate]:
    return await EXTRACTOR.extract(ExtractionInput(user, assistant, recalled))


# (user message, expected candidates in order)
CASES: list[tuple[str, list[Candidate]]] = [
    # preferences
    ("I prefer concise bullet points.", [fact("Prefers concise bullet points", P)]),
    ("i really prefer GSQL over Cypher", [fact("Prefers GSQL over Cypher", P)]),
    (
        "I prefer GSQL over Cypher because it is faster.",
        [fact("Prefers GSQL over Cypher", P)],
    ),
    (
        "From now on always answer in French.",
        [fact("Wants the assistant to always answer in French", P)],
    ),
    (
        "Please always include the GSQL code in your answers.",
        [fact("Wants the assistant to always include the GSQL code in the assistant's answers", P)],
    ),
    ("Never use emojis.", [fact("Wants the assistant to never use emojis", P)]),
    (
        "Don't ever use emojis in answers!",
        [fact("Wants the assistant to never use emojis in answers", P)],
    ),
    (
        "Going forward, use metric units.",
        [fact("Wants the assistant to always use metric units", P)],
    ),
    (
        "I'd like you to always show the query plan.",
        [fact("Wants the assistant to always show the query plan", P)],
    ),
    ("I hate it when you use emojis.", [fact("Hates it when the assistant uses emojis", P)]),
    ("I don't like long preambles.", [fact("Dislikes long preambles", P)]),
    ("I love jazz", [fact("Loves jazz", P)]),
    (
        "Great, thanks. I'm a huge fan of Louvain for community detection.",
        [fact("Is a fan of Louvain for community detection", P)],
    ),
    ("My favourite graph is Finance.", [fact("Favourite graph is Finance", P)]),
    ("Remember that my default graph is Payments_v2.", [fact("Default graph is Payments_v2", P)]),
    # identity
    ("call me Sam", [fact("Wants to be called Sam", ID)]),
    ("Please call me Sam from now on.", [fact("Wants to be called Sam", ID)]),
    ("my timezone is CET", [fact("Timezone is CET", ID)]),
    (
        "My name is Priya and I work at Northwind Bank.",
        [fact("Name is Priya", ID), fact("Works at Northwind Bank", ID)],
    ),
    (
        "I'm a data engineer at Acme and my team is Risk Analytics.",
        [fact("Is a data engineer at Acme", ID), fact("Team is Risk Analytics", ID)],
    ),
    ("I live in Berlin.", [fact("Lives in Berlin", ID)]),
    ("btw I'm on the fraud analytics team", [fact("Is on the fraud analytics team", ID)]),
    # goals
    (
        "I'm working on a fraud ring detection pipeline in GSQL.",
        [fact("Is working on a fraud ring detection pipeline in GSQL", G)],
    ),
    (
        "My goal is to detect money-laundering rings before they grow.",
        [fact("Goal is to detect money-laundering rings before they grow", G)],
    ),
    (
        "I want to build a GraphRAG chatbot for our support team.",
        [fact("Wants to build a GraphRAG chatbot for their support team", G)],
    ),
    ("I'm trying to learn GSQL.", [fact("Is trying to learn GSQL", G)]),
    (
        "Now I'm working on fraud detection.",
        [fact("Is working on fraud detection", G, change=True)],
    ),
    # decisions
    (
        "I decided to use TigerGraph Cloud for production.",
        [fact("Decided to use TigerGraph Cloud for production", D)],
    ),
    (
        "We will use GSQL for all production queries.",
        [fact("Will use GSQL for all production queries", D)],
    ),
    ("Let's use the Finance graph from now on.", [fact("Will use the Finance graph", D)]),
    (
        "We've chosen Louvain for community detection.",
        [fact("Chose Louvain for community detection", D)],
    ),
    # several facts in one sentence
    (
        "always answer in French; I prefer concise bullet points",
        [
            fact("Wants the assistant to always answer in French", P),
            fact("Prefers concise bullet points", P),
        ],
    ),
    ("I like jazz but I hate techno.", [fact("Likes jazz", P), fact("Hates techno", P)]),
    # changes
    ("I now prefer tea.", [fact("Prefers tea", P, change=True)]),
    (
        "Actually I prefer long explanations now.",
        [fact("Prefers long explanations", P, change=True)],
    ),
    ("I changed my mind, I prefer Python.", [fact("Prefers Python", P, change=True)]),
    ("I work at Initech now.", [fact("Works at Initech", ID, change=True)]),
    # retractions
    ("Forget that I like jazz.", [gone("Likes jazz", P)]),
    ("Could you forget that I like jazz?", [gone("Likes jazz", P)]),
    ("I don't like jazz anymore.", [gone("Likes jazz", P, change=True)]),
    ("I no longer work at Acme.", [gone("Works at Acme", ID, change=True)]),
    ("I'm not a student anymore.", [gone("Is a student", ID, change=True)]),
    ("I don't drink coffee anymore", [gone("Drinks coffee", OT, change=True)]),
    ("Ignore what I said about coffee.", [gone("Coffee", OT)]),
    ("Forget my timezone.", [gone("Timezone", ID)]),
    (
        "You said I prefer coffee, but that's not true anymore.",
        [gone("Prefers coffee", P, change=True)],
    ),
    ("I like jazz. Actually, that's not true anymore.", [gone("Likes jazz", P, change=True)]),
    (
        "I don't like coffee anymore, I prefer tea",
        [gone("Likes coffee", P, change=True), fact("Prefers tea", P, change=True)],
    ),
    (
        "I'm not working on the Finance graph anymore.",
        [gone("Is working on the Finance graph", G, change=True)],
    ),
    ("My timezone is no longer CET.", [gone("Timezone is CET", ID, change=True)]),
    # polite requests and statements next to other people's
    ("Can you remember that I prefer dark mode?", [fact("Prefers dark mode", P)]),
    ("My wife prefers tea, but I prefer coffee.", [fact("Prefers coffee", P)]),
    ("I prefer my answers short.", [fact("Prefers their answers short", P)]),
    ("I switched to Cypher.", [fact("Switched to Cypher", D, change=True)]),
    # nothing durable: questions, chit-chat, hypotheticals, others, one-offs
    ("I like the way you explained that.", []),
    ("I love your answers.", []),
    ("Please use a table.", []),
    ("I want to find all accounts linked to account 123.", []),
    ("Forget about the last query, show me the accounts instead.", []),
    ("He told me I prefer concise answers.", []),
    ("Can you show me the fraud rings in the Finance graph?", []),
    ("How do I write a GSQL query that finds accounts sharing a device?", []),
    ("Do I prefer tea?", []),
    ("can you always answer in French?", []),
    ("I don't like jazz anymore?", []),
    ("Which accounts are within three hops of account 4411", []),
    ("Thanks!", []),
    ("ok great", []),
    ("Hi there!", []),
    ("If I preferred Python, would you write it in Python?", []),
    ("Maybe I'll use Neo4j instead.", []),
    ("I think I prefer tables.", []),
    ("I prefer Python, I think.", []),
    ("I prefer tables if the result has more than ten rows.", []),
    ("I'm a data engineer, I guess.", []),
    ("Forget that I like jazz, if you can.", []),
    ("I'd prefer shorter answers.", []),
    ("I used to like jazz.", []),
    ("My boss prefers Excel.", []),
    ("She said I like jazz.", []),
    ('"I prefer tea," my colleague wrote.', []),
    ("My manager said we will use Neo4j.", []),
    ("My query is slow.", []),
    ("My graph is huge and the loader keeps failing.", []),
    ("For this query, I prefer tables.", []),
    ("I prefer tea for now.", []),
    ("I like this answer.", []),
    ("I love that!", []),
    ("Let's use the Finance graph.", []),
    ("Show me the top 10 accounts by PageRank, I'm investigating a fraud ring.", []),
    ("I'm getting a timeout when I run the loader job.", []),
    ("I'm a bit confused about accumulators.", []),
    ("I'm trying to get this query to work.", []),
    ("That's not true anymore.", []),
    ("call me later", []),
    ("I'm a huge fan.", []),  # of what?
    ("They brighten up our day and always make us smile.", []),  # not an instruction
    ("We'll keep going and never give up.", []),
    ("Run PageRank on the Finance graph and list the top accounts.", []),
]


def test_the_table_is_large_and_mixed() -> None:
    assert len(CASES) >= 40
    assert sum(1 for _, expected in CASES if not expected) >= 20
    assert {c.kind for _, expected in CASES for c in expected} == set(FactKind)


@pytest.mark.parametrize(("message", "expected"), CASES, ids=[m[:50] for m, _ in CASES])
async def test_extracts(message: str, expected: list[Candidate]) -> None:
    assert await extract(message) == expected


def test_name() -> None:
    assert EXTRACTOR.name == "rules-v1"


async def test_only_the_users_words_count() -> None:
    assistant = "I prefer concise bullet points. My name is Bot. Call me Bot. I'm a data engineer."
    assert await extract("Can you help me with a GSQL query?", assistant) == []
    assert await extract("I prefer tea.", assistant) == [fact("Prefers tea", P)]


async def test_a_multi_sentence_turn() -> None:
    message = (
        "Hi! I'm a fraud analyst at Northwind Bank. I'm working on detecting mule account rings. "
        "Can you write a GSQL query that finds accounts sharing a device? "
        "Please always explain the accumulators, and keep answers short from now on."
    )
    assert await extract(message) == [
        fact("Is a fraud analyst at Northwind Bank", ID),
        fact("Is working on detecting mule account rings", G),
        fact("Wants the assistant to always explain the accumulators", P),
        fact("Wants the assistant to always keep answers short", P),
    ]


async def test_the_same_fact_twice_in_a_turn_is_one_candidate() -> None:
    assert await extract("I prefer tea. I prefer tea!") == [fact("Prefers tea", P)]


class TestRecalledFactsAreNotExtractedAgain:
    async def test_the_same_sentence(self) -> None:
        recalled = ("I prefer concise bullet points.",)
        assert await extract("I prefer concise bullet points", recalled=recalled) == []

    async def test_the_same_fact_in_third_person(self) -> None:
        recalled = ("Prefers concise bullet points",)
        assert await extract("I prefer concise bullet points.", recalled=recalled) == []
        assert (
            await extract("Never use emojis", recalled=("Wants the assistant to never use emojis",))
            == []
        )

    async def test_a_sentence_mostly_covered_by_a_recalled_fact(self) -> None:
        recalled = ("Prefers concise bullet points for GSQL answers",)
        assert await extract("I prefer concise bullet points.", recalled=recalled) == []

    async def test_only_the_repeated_part_is_dropped(self) -> None:
        recalled = ("Prefers concise bullet points",)
        message = "I prefer concise bullet points. My timezone is CET."
        assert await extract(message, recalled=recalled) == [fact("Timezone is CET", ID)]

    async def test_a_different_fact_is_kept(self) -> None:
        assert await extract("I now prefer tea.", recalled=("Prefers coffee",)) == [
            fact("Prefers tea", P, change=True)
        ]
        recalled = ("Prefers concise bullet points",)
        assert await extract("I prefer concise numbered lists.", recalled=recalled) == [
            fact("Prefers concise numbered lists", P)
        ]
        never = ("Wants the assistant to never use emojis",)  # "never" ≠ "always"
        assert await extract("Always use emojis.", recalled=never) == [
            fact("Wants the assistant to always use emojis", P)
        ]

    async def test_a_negation_is_not_a_repeat(self) -> None:
        assert await extract("I don't like jazz.", recalled=("Likes jazz",)) == [
            fact("Dislikes jazz", P)
        ]

    async def test_retracting_a_recalled_fact_still_works(self) -> None:
        recalled = ("Likes jazz",)
        assert await extract("I don't like jazz anymore.", recalled=recalled) == [
            gone("Likes jazz", P, change=True)
        ]
        assert await extract("Forget that I like jazz", recalled=recalled) == [
            gone("Likes jazz", P)
        ]


async def test_from_now_on_is_a_change_only_against_a_recalled_fact_on_the_same_slot() -> None:
    message = "From now on answer in Spanish."
    spanish = "Wants the assistant to always answer in Spanish"
    assert await extract(message) == [fact(spanish, P)]
    assert await extract(message, recalled=("Prefers concise answers",)) == [fact(spanish, P)]
    french = ("Wants the assistant to always answer in French",)
    assert await extract(message, recalled=french) == [fact(spanish, P, change=True)]


async def test_deterministic() -> None:
    message = " ".join(m for m, _ in CASES)
    first = await extract(message)
    assert len(first) >= 20
    for _ in range(3):
        assert await RuleExtractor().extract(ExtractionInput(message, "")) == first


def test_fast_on_short_turns() -> None:
    extractor = RuleExtractor()
    turns = [ExtractionInput(m, "", ("Prefers coffee", "Timezone is CET")) for m, _ in CASES]
    for turn in turns:  # compile and warm up
        extractor.extract_sync(turn)
    start = time.perf_counter()
    rounds = 20
    for _ in range(rounds):
        for turn in turns:
            extractor.extract_sync(turn)
    per_turn = (time.perf_counter() - start) / (rounds * len(turns))
    assert per_turn < 0.002, f"{per_turn * 1e3:.3f} ms per turn"


def test_no_pathological_backtracking() -> None:
    # Long run-on text with many commas, conjunctions and first-person starts.
    message = ", and I really really really also " * 400 + "prefer tea " + "x, " * 2000
    start = time.perf_counter()
    RuleExtractor().extract_sync(ExtractionInput(message, ""))
    assert time.perf_counter() - start < 1.0


def test_the_rule_extractor_imports_no_adapters() -> None:
    code = (
        "import sys, memory_server.memory.learning.extract, memory_server.memory.facts.restated\n"
        "loaded = set(sys.modules)\n"
        "bad = {'grpc', 'asyncpg', 'httpx', 'tenacity'} & {m.split('.')[0] for m in loaded}\n"
        "bad |= {m for m in loaded if m.startswith(('memory_server.openai_http',"
        " 'memory_server.extraction', 'memory_server.embedding', 'memory_server.llm'))}\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env={"PYTHONPATH": ":".join(sys.path)})
