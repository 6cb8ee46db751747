"""Deterministic long-term facts and questions for the recall benchmark.

A scope's facts are what a GraphRAG user over financial graphs would have told the assistant:
projects and the graphs they live in, people, counterparties, thresholds, schedules and
preferences. They are drawn from templates with a seeded RNG (one seed per scope), so every
run stores the same texts, and no scope holds the same text twice. Two per scope are standing
instructions about how to answer, which recall puts into every turn. The questions use the
same vocabulary, so each one brings up some facts (lexically and by meaning) but not all.
"""

from __future__ import annotations

import random

from memory_server.memory.recall.rank import is_standing_instruction

PEOPLE = (
    "Anna Roth", "Thomas Falk", "Mei Ling Chua", "Jonas Weber", "Lena Tan", "Ravi Diaz",
    "Sofia Kessler", "Marco Lindner", "Priya Nair", "Oliver Brandt", "Hana Sato", "Luis Ortega",
)  # fmt: skip
GRAPHS = (
    "Finance", "SupplyChain", "FraudRings", "CustomerJourney", "Compliance", "EnergyRisk",
    "Payments", "Procurement",
)  # fmt: skip
PROJECTS = (
    "quarterly audit", "sanctions screening", "credit exposure review", "supplier onboarding",
    "churn model", "AML alert triage", "merger integration", "vendor risk scoring",
    "liquidity forecast", "invoice reconciliation",
)  # fmt: skip
COMPANIES = (
    "Northwind Trading", "Contoso Ltd", "Globex Capital", "Acme Holdings", "Helios Power",
    "Baltic Freight", "Orion Metals", "Vantage Oil", "Sunrise Components", "Halden Services",
    "Norland Chemicals", "Marlow Trade",
)  # fmt: skip
REGIONS = ("EMEA", "APAC", "AMER", "DACH", "Nordics", "LATAM")
CITIES = ("Berlin", "Singapore", "Lisbon", "Toronto", "Zurich", "Austin", "Dublin", "Osaka")
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")

FACT_TEMPLATES = (
    "Works on the {project} project in the {graph} graph",
    "{person} is the user's manager for the {project} project",
    "Only wants {company} transactions above ${n},000 flagged",
    "Reviews the {region} {project} figures every {day}",
    "Owns the {graph} graph schema together with {person}",
    "Considers {company} a high-risk counterparty since {year}",
    "The {project} deadline is in {n} days",
    "Uses a threshold of {n} days for overdue invoices in {region}",
    "Is based in the {city} office and covers {region}",
    "Reports to {person} on the {company} account",
    "Wants {company} excluded from the {project} reports",
    "Tracks {n} suppliers in {region} for the {project} project",
    "Asked {person} to rebuild the {graph} graph loader before {day}",
    "Found {n} shell companies linked to {company} in the {graph} graph",
)
STANDING = (
    "Always give amounts in EUR with thousands separators",
    "Wants the assistant to answer in short bullet points",
)
QUESTION_TEMPLATES = (
    "Who is my manager for the {project} project, and which graph does it use?",
    "What threshold did I set for overdue invoices in {region}?",
    "Which {company} transactions should be flagged, and is it a high-risk counterparty?",
    "When is the {project} deadline, and who owns the {graph} graph schema?",
    "How many shell companies did we find linked to {company} in the {graph} graph?",
    "Which suppliers in {region} do I track for the {project} project?",
    "Who do I report to on the {company} account, and which office am I in?",
    "Should {company} be excluded from the {project} reports this quarter?",
)


def fill(template: str, rng: random.Random) -> str:
    return template.format(
        person=rng.choice(PEOPLE),
        graph=rng.choice(GRAPHS),
        project=rng.choice(PROJECTS),
        company=rng.choice(COMPANIES),
        region=rng.choice(REGIONS),
        city=rng.choice(CITIES),
        day=rng.choice(DAYS),
        n=rng.randrange(3, 250),
        year=rng.randrange(2015, 2026),
    )


def scope_facts(scope_index: int, count: int) -> list[str]:
    """`count` distinct facts for one scope: the standing instructions first (at most two,
    fewer when count is tiny), then templated facts, none of them standing by accident."""
    rng = random.Random(f"recall-facts-{scope_index}")
    out = list(STANDING[: min(len(STANDING), count // 100)])
    seen = set(out)
    while len(out) < count:
        text = fill(rng.choice(FACT_TEMPLATES), rng)
        if text not in seen and not is_standing_instruction(text):
            seen.add(text)
            out.append(text)
    return out


def questions(count: int = 64) -> list[str]:
    """The questions every phase cycles through (the same list for floor and StartTurn)."""
    rng = random.Random("recall-questions")
    return [fill(QUESTION_TEMPLATES[i % len(QUESTION_TEMPLATES)], rng) for i in range(count)]
