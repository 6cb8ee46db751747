"""The fact quality rules (bench/fact_quality/RULES.md) on the labelled set of facts the offline
path learned on LoCoMo's dev split, and on the learning path itself (issue 30, item 5).

The labelled set holds the learned fact texts only (no dialogue). Each fact goes through what
the rule extractor does with a self statement: `quality.tidy`, `quality.verdict`, then
`Recalled.restates` against the live facts of its scope it is closest to.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from memory_server.memory.facts.restated import Recalled
from memory_server.memory.learning.extract import RuleExtractor
from memory_server.memory.learning.quality import Broken, tidy, verdict
from memory_server.memory.ports import ExtractionInput

FIXTURES = Path(__file__).resolve().parent.parent / "bench" / "fact_quality"
LABELLED = FIXTURES / "labelled.jsonl"
AFTER = FIXTURES / "after_labelled.jsonl"
LABELS = {"good", "vague", "small_talk", "reaction", "garbled", "restatement"}
RULE_OF = {"vague": {"R1", "R4"}, "small_talk": {"R3"}, "reaction": {"R3"}, "garbled": {"R5"}}


def _items(split: str | None = None, path: Path = LABELLED) -> list[dict[str, object]]:
    items = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return [i for i in items if split is None or i["split"] == split]


def _kept(item: dict[str, object]) -> bool:
    text = tidy(str(item["fact"]))
    earlier = item["earlier"]
    assert isinstance(earlier, list)
    return verdict(text) is None and not Recalled([str(e) for e in earlier]).restates(text)


def _tally(items: list[dict[str, object]]) -> tuple[Counter[str], Counter[str]]:
    kept: Counter[str] = Counter()
    dropped: Counter[str] = Counter()
    for item in items:
        (kept if _kept(item) else dropped)[str(item["label"])] += 1
    return kept, dropped


def test_the_labelled_set_is_complete_and_labelled_by_the_rules() -> None:
    items = _items()
    assert len(items) >= 200
    assert {i["split"] for i in items} == {"tune", "check"}
    for item in items:
        label, rule = item["label"], item["rule"]
        assert label in LABELS, item
        if label == "good":
            assert rule == "", item
        elif label == "restatement":
            assert rule == "R6" and item["earlier"], item
        else:
            assert rule in RULE_OF[str(label)], item
    counts = Counter(str(i["label"]) for i in items)
    # Before the rules about half the learned facts were good (the reading): 48.0 %, and
    # 8.9 % restated a live fact.
    assert 0.4 <= counts["good"] / len(items) <= 0.55
    assert counts["restatement"] / len(items) >= 0.08
    # A sample of what the path learns with the rules, labelled the same way: 67.3 % good,
    # 4.0 % restatements (bench/fact_quality/RULES.md).
    after = _items(path=AFTER)
    assert len(after) == 150 and {str(i["label"]) for i in after} <= LABELS
    shares = Counter(str(i["label"]) for i in after)
    assert shares["good"] / len(after) >= 0.65
    assert shares["restatement"] / len(after) <= 0.045


def test_the_rules_keep_good_facts_and_drop_the_others() -> None:
    kept, dropped = _tally(_items())
    total_kept = sum(kept.values())
    # Measured: 86.1 % good and 4.0 % restatements among the 173 kept (48.0 % and 8.9 % before);
    # 11.3 % of the good facts are lost (81.8 %, 4.3 % and 8.9 % before the third round, whose
    # words that say nothing specific take most of the vague facts left). These are the facts
    # the rules were written on: the census of what the path learns (RULES.md) is the measure,
    # these figures a regression check. The reconciler's restatements in other words are not
    # in it (tests/test_restated.py).
    assert kept["good"] / total_kept >= 0.85
    assert kept["restatement"] / total_kept <= 0.045
    assert dropped["good"] / (kept["good"] + dropped["good"]) <= 0.12
    # Every garbled fact, nearly all small talk and most vague facts and restatements go.
    assert dropped["garbled"] == kept["garbled"] + dropped["garbled"]
    assert dropped["small_talk"] / (kept["small_talk"] + dropped["small_talk"]) >= 0.95
    assert dropped["vague"] / (kept["vague"] + dropped["vague"]) >= 0.8
    assert dropped["restatement"] / (kept["restatement"] + dropped["restatement"]) >= 0.77


def test_the_census_labels_every_fact_the_path_learned_by_the_rules() -> None:
    census = _items(path=FIXTURES / "census.jsonl")
    assert len(census) >= 787
    assert {str(i["source"]) for i in census} == {"earlier", "census", "added"}
    for item in census:
        label, rule = str(item["label"]), str(item["rule"])
        assert label in LABELS, item
        assert (rule == "") == (label == "good"), item
        if label == "restatement":
            # What it says again, and its label once none of that is live (census.py).
            assert rule == "R6" and item["restates"], item
            assert item["otherwise"] in LABELS - {"restatement"}, item
        elif label != "good":
            assert rule in RULE_OF[label], item
    counts = Counter(str(i["label"]) for i in census if i["source"] != "added")
    # What the path learned at 3079a46: 69.4 % good, 6.1 % restatements (RULES.md).
    assert counts["good"] == 546 and counts["restatement"] == 48
    # The third round's words alone (the facts read as self statements, without their scope):
    # 74.9 % good among the 708 they keep, 17 good facts dropped for 63 bad ones.
    kept: Counter[str] = Counter()
    dropped: Counter[str] = Counter()
    for item in census:
        (kept if verdict(tidy(str(item["fact"]))) is None else dropped)[str(item["label"])] += 1
    assert kept["good"] / sum(kept.values()) >= 0.745
    assert dropped["good"] <= 17


def test_the_rules_hold_on_the_sample_labelled_before_they_were_run() -> None:
    kept, dropped = _tally(_items("check"))
    # Measured 80.4 % good among the 56 kept (45.5 % before, 77.6 % after the second round),
    # 10 % of its good facts lost: it has been looked at since, so this is no longer a blind
    # figure, only a check that the rules do not fit one part of the set alone.
    assert kept["good"] / sum(kept.values()) >= 0.80
    assert dropped["good"] / (kept["good"] + dropped["good"]) <= 0.1


@pytest.mark.parametrize(
    ("text", "broken"),
    [
        ("Read it a while back and it really changed their perspective", Broken.SUBJECT),
        ("Made strong connections with people there", Broken.SUBJECT),
        ("Is going to keep pushing forward and believing in themselves", Broken.SMALL_TALK),
        ("Nature sure has a way of leaving them speechless", Broken.SMALL_TALK),
        ("Loves how video games can really spark the assistant's imagination", Broken.SMALL_TALK),
        ("Is so lucky to be a part of this team", Broken.SMALL_TALK),
        ("Went to an event", Broken.VAGUE),
        ("Had a great time last weekend", Broken.VAGUE),
        ("Mays have found a job at a tech company", Broken.GARBLED),
        ("Both knows it took some effort", Broken.GARBLED),
        ("Went camping last weekend", None),
        ("Favorite character is Aragorn, he grows so much throughout the story", None),
        ("Is currently playing this fantasy RPG called Xenoblade Chronicles", None),
        ("Knows hard work is what got them this far in their career", None),
        ("Wants the assistant to always answer in French", None),
        # Added with the second round of rules (bench/fact_quality/RULES.md).
        ("Taking time for themselves is vital", Broken.SMALL_TALK),
        ("Staying in shape is important to them", None),
        ("Is completely content already", Broken.SMALL_TALK),
        ("The world building and storytelling always blow them away", Broken.SMALL_TALK),
        ("Is going to keep using their voice to make a change", Broken.SMALL_TALK),
        ("Pushes each other to be their best", Broken.SUBJECT),
        ("Found these lovely flowers", Broken.SUBJECT),
        ("Goes a few times a week", Broken.VAGUE),
        ("All had great ideas and brainstormed together", Broken.GARBLED),
        ("Had a blast on their camping trip last summer", None),
        ("Plays chess with Maria and they push each other", None),
        # Third round: words that say what a statement is like, not what it is about.
        ("Loves helping others", Broken.VAGUE),
        ("Their hard work is paying off", Broken.VAGUE),
        ("Creativity and family keep them at peace", Broken.VAGUE),
        ("Learns a lot from their own struggles", Broken.VAGUE),
        ("Loves making dairy-free desserts for friends", None),
        ("Has always wanted to learn Spanish", None),  # a name and one word are enough
    ],
)
def test_each_rule(text: str, broken: Broken | None) -> None:
    assert verdict(text) is broken


def test_a_comment_is_cut_and_a_detail_kept() -> None:
    assert tidy("Organized a toy drive for kids in need. It was amazing seeing it") == (
        "Organized a toy drive for kids in need"
    )
    assert tidy("Loves all the yellow leaves, it looks so cozy") == "Loves all the yellow leaves"
    assert tidy("Painting is their escape. It helps them relax after work") == (
        "Painting is their escape. It helps them relax after work"
    )


def test_restatements_in_other_words() -> None:
    known = Recalled(["Has always liked turtles since they were a boy", "Volunteers at a shelter"])
    assert known.restates("Loves turtles")
    assert known.restates("Is still volunteering at a shelter")
    assert not known.restates("Loves tortoises")
    assert Recalled(["Took the first step towards becoming a mom"]).restates(
        "Took the first step towards becoming a mom - they applied to adoption agencies"
    )
    # A change of stance is no restatement: reconciliation decides it.
    assert not Recalled(["Doesn't like jazz"]).restates("Likes jazz")


def _learned(text: str, *, precise: bool = True, recalled: tuple[str, ...] = ()) -> list[str]:
    found = RuleExtractor(precise=precise).extract_sync(ExtractionInput(text, "", recalled))
    return [c.text for c in found]


def test_the_learning_path_keeps_one_precise_fact() -> None:
    turn = "I organized a book fair at my school. It was amazing seeing everyone come together."
    # Before: the form's fact and, again, the pair read with the sentence that points at it.
    assert _learned(turn, precise=False) == [
        "Organized a book fair at their school",
        "Organized a book fair at their school. It was amazing seeing everyone come together",
    ]
    assert _learned(turn) == ["Organized a book fair at their school"]
    assert _learned("I'm going to keep pushing forward, no matter what.") == []
    assert _learned("Had a blast there with everyone.") == []
    assert _learned("We went to the beach, it was awesome") == ["Went to the beach"]
    assert _learned("I still love pottery so much", recalled=("Loves pottery",)) == []
