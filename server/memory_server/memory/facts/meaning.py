"""What the reconciler asks of a candidate beside its cosine, to tell a fact said again in
other words from a new one (memory/facts/reconcile.py, `restated_at`): whether the two are
about different things.

The cut-off itself, `RESTATED_AT`, is a cosine of the offline MiniLM model.
"""

from __future__ import annotations

from memory_server.memory.facts.shape import FactShape, about_other_slots
from memory_server.memory.learning.quality_rules import EMPTY, GENERIC
from memory_server.memory.learning.words import content_words

# Where an undated candidate restates a live fact (MiniLM cosine), chosen by leave-one-
# conversation-out on LoCoMo's dev split (bench/fact_quality/RULES.md, "Third round"): every
# fold's fit is flat from 0.64 to 0.70.
RESTATED_AT = 0.66
# The words that name nothing, as content_words stems them (memory/learning/quality_rules.py).
_SAY_NOTHING = content_words(" ".join(sorted(GENERIC | EMPTY)))
_SHORT = 2  # content words that name something, at most


def other_subject(a: FactShape, b: FactShape) -> bool:
    """Both facts say what the user likes or is, of different things: "Likes blues" after
    "Likes jazz" (cosine 0.7 and more) is a second fact, not the first said again."""
    mine, theirs = _objects(a), _objects(b)
    return about_other_slots(a, b) or bool(mine and theirs and not mine & theirs)


def other_thing(mine: str, theirs: str) -> bool:
    """A short fact that names a thing the live fact does not: "Has 3 dogs" after "Has 3
    cats" (cosine 0.8) is a second fact. In a longer one a new word is how a paraphrase says it
    ("Is still searching for a place to open their dance studio")."""
    said = content_words(mine) - _SAY_NOTHING
    return len(said) <= _SHORT and bool(said - content_words(theirs))


def _objects(shape: FactShape) -> set[str]:
    """What a liking statement is about ("obj:coconut milk"), not its category ("drink:milk")."""
    return {k for k in shape.stances if k.startswith("obj:")}
