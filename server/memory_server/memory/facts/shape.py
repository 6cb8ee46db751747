"""What a fact's text says, in a small shape the reconciler and recall compare: its normalised
key, its stances and the slots it fills.

Similarity alone cannot tell a restatement from a contradiction: with MiniLM
"Wants the assistant to never use emojis" and "... always use emojis" score 0.97, while
"Prefers concise bullet points" and "Prefers long explanations" score only 0.48. So a fact's
text is parsed into a small shape:

* stances: the object of a polar head (prefers/likes/loves/enjoys/is a fan of/wants the
  assistant to [always] → positive; dislikes/hates/avoids/can't stand/wants the assistant to
  never → negative), plus every vocabulary value found in it. The same object or value with
  opposite polarity clashes ("Likes jazz" / "Hates jazz", "Prefers tables" / "Wants the
  assistant to never use tables").
* exclusive slots: one value at a time. From exclusive preference heads (prefers, would rather,
  wants the assistant to, wants answers): answer language (needs "in <Language>" or a word like
  answer/reply/write), verbosity (short/long), format (bullets/table/prose/numbered/json/yaml),
  tone (formal/casual), units, drink, programming language, query language, graph database.
  From attribute texts "<Attribute> is <Value>" ("Timezone is CET", "Favourite graph is
  Finance"; favorite = favourite, time zone = timezone, job/title/position = role, leading
  current/main/primary/preferred dropped), "Wants to be called X" / "Goes by X" (called),
  "Lives in X" / "Is based in X" / "Moved to X" (location), "Works at/for X" (employer),
  "Works as X" (role), "Reports to X" (manager; boss, supervisor and line manager are the same
  attribute). For the user's people ("Sister is Ann", "Sister is a nurse") who they are and
  what they are are two slots, so the one does not replace the other.
  A shared slot with different values clashes, unless the preferences carry different
  qualifiers ("... for summaries" vs none): a narrower preference does not replace a general one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

_WORD_RE = re.compile(r"[\w+#][\w+#'-]*")
_NEGATIVE_HEADS = (
    "wants the assistant to never ",
    "doesn't like ",
    "does not like ",
    "can't stand ",
    "cannot stand ",
    "dislikes ",
    "hates ",
    "avoids ",
)
_EXCLUSIVE_HEADS = (
    "wants the assistant to always ",
    "wants the assistant to ",
    "wants answers ",
    "would rather ",
    "prefers ",
)
_PLAIN_HEADS = ("is a big fan of ", "is a fan of ", "likes ", "loves ", "enjoys ")
_LEAD_RE = re.compile(r"^(?:the user's |user's |their |my )")
_QUALIFIER_RE = re.compile(r"\b(?:for|when|while|during|if)\b (.+)$")
_LANGUAGE_CUE_RE = re.compile(
    r"\b(?:answers?|respon(?:d|ses?)|repl(?:y|ies)|writ(?:e|ten|ing)|speak|talk|language|"
    r"explanations?|explain)\b"
)


def _same(words: str) -> list[tuple[str, str]]:
    """Vocabulary entries that are their own value."""
    return [(re.escape(w), w) for w in words.split()]


_LANGUAGES = """english french german spanish portuguese italian dutch polish russian ukrainian
chinese mandarin cantonese japanese korean arabic hindi turkish swedish norwegian danish finnish
greek hebrew czech vietnamese thai indonesian"""
_LANGUAGE_RE = re.compile(r"\b(" + "|".join(_LANGUAGES.split()) + r")\b")
_SHORT = r"concise|short(?:er)?|brief(?:er)?|terse|succinct|compact|minimal|to the point"
_LONG = r"long(?:er)?|detailed|verbose|lengthy|in[- ]depth|thorough|elaborate|comprehensive"
_LONG += r"|extensive|exhaustive"

# slot -> [(pattern, value)]; the earliest match in the text is the preferred value, so
# "Prefers GSQL over Cypher" is about GSQL.
_VOCABULARY: dict[str, list[tuple[re.Pattern[str], str]]] = {
    slot: [(re.compile(rf"(?<![\w+#])(?:{pattern})(?![\w+#])"), value) for pattern, value in pairs]
    for slot, pairs in {
        "verbosity": [(_SHORT, "short"), (_LONG, "long")],
        "format": [
            (r"bullet(?:ed)?(?:[- ]points?)?s?", "bullets"),
            (r"tables?|tabular", "table"),
            (r"prose|paragraphs?|plain text|full sentences", "prose"),
            (r"numbered (?:lists?|steps)", "numbered"),
            *_same("json yaml"),
        ],
        "tone": [(r"formal", "formal"), (r"casual|informal", "casual")],
        "units": _same("metric imperial"),
        "drink": _same("coffee tea espresso latte cappuccino matcha chai decaf cocoa milk"),
        "programming language": _same(
            "python java javascript typescript golang rust scala kotlin ruby php julia c++ c#"
        ),
        "query language": _same("gsql cypher gremlin sparql sql"),
        "graph database": _same(
            "tigergraph neo4j neptune memgraph arangodb janusgraph nebulagraph"
        ),
    }.items()
}
_ATTRIBUTE_RE = re.compile(r"^(?P<attr>[a-z][\w' -]*?) (?:is|are) (?P<value>\S.*)$")
_HEAD_VERBS = """is was wants prefers likes loves hates dislikes enjoys works lives decided will
chose plans hopes goes avoids"""
_NOT_ATTRIBUTE_WORDS = frozenset(_HEAD_VERBS.split())
_ATTRIBUTE_ALIASES = {"time zone": "timezone", "tz": "timezone", "job": "role", "title": "role"}
_ATTRIBUTE_ALIASES |= {"job title": "role", "position": "role"}
_ATTRIBUTE_ALIASES |= {"boss": "manager", "supervisor": "manager", "line manager": "manager"}


# The user's people ("my sister is Ann"): one slot for who they are, another for what they are
# ("Sister is a nurse"), so that the one does not replace the other.
def words(text: str) -> frozenset[str]:
    """The words of a vocabulary written as one string."""
    return frozenset(text.split())


PEOPLE = words(
    """manager boss supervisor mentor coworker colleague partner wife husband girlfriend boyfriend
    fiance fiancee fiancé fiancée spouse sister brother sibling mom mum mother dad father son
    daughter grandma grandmother grandpa grandfather granddaughter grandson aunt uncle cousin
    niece nephew friend roommate flatmate housemate neighbour neighbor landlord landlady dentist
    doctor gp therapist psychiatrist vet lawyer accountant trainer coach teacher tutor professor
    advisor adviser dog cat pet puppy kitten horse"""
)
_RELATION_RES = [
    (re.compile(r"^(?:wants to be called|goes by) (?P<value>.+)$"), "called"),
    (re.compile(r"^(?:lives in|is based in|moved to) (?P<value>.+)$"), "location"),
    (re.compile(r"^reports to (?P<value>.+)$"), "manager"),
    (re.compile(r"^works (?:at|for) (?P<value>.+)$"), "employer"),
    (re.compile(r"^works as (?P<value>.+)$"), "role"),
    (re.compile(r"^is in (?:the )?(?P<value>\S+) time ?zone$"), "timezone"),
]


def normalise(text: str) -> str:
    """Lower case, straight apostrophes, words only: the key for "same text"."""
    return " ".join(_WORD_RE.findall(text.replace("’", "'").casefold()))


@dataclass(frozen=True, slots=True)
class FactShape:
    """What the slot rules see of a fact's text (see the module doc)."""

    slots: Mapping[str, str] = field(default_factory=dict)
    stances: Mapping[str, bool] = field(default_factory=dict)
    qualifier: str = ""


def shape_of(text: str) -> FactShape:
    t = _LEAD_RE.sub("", normalise(text))
    for slot_re, slot in _RELATION_RES:
        if m := slot_re.match(t):
            return FactShape(slots={slot: _value(m["value"])})
    head, positive, exclusive = "", True, False
    for heads, pos, exc in (
        (_NEGATIVE_HEADS, False, False),
        (_EXCLUSIVE_HEADS, True, True),
        (_PLAIN_HEADS, True, False),
    ):
        head = next((h for h in heads if t.startswith(h)), "")
        if head:
            positive, exclusive = pos, exc
            break
    if not head:
        m = _ATTRIBUTE_RE.match(t)
        if m and len(words := m["attr"].split()) <= 4 and not _NOT_ATTRIBUTE_WORDS & set(words):
            attr, value = _attribute(m["attr"]), _value(m["value"])
            if attr.split()[-1] in PEOPLE and re.match(r"(?:a|an) ", m["value"]):
                attr += " (what)"  # "Sister is a nurse" is not about her name
            return FactShape(slots={attr: value})
        return FactShape()
    obj = t[len(head) :]
    stances = {"obj:" + obj: positive}
    slots: dict[str, str] = {}
    for slot, value in _vocabulary_values(obj):
        stances[f"{slot}:{value}"] = positive
        if exclusive:
            slots[slot] = value
    qualifier = m[1] if exclusive and (m := _QUALIFIER_RE.search(obj)) else ""
    return FactShape(slots=slots, stances=stances, qualifier=qualifier)


def clashes(a: FactShape, b: FactShape) -> bool:
    """True when the two facts cannot both hold (see the module doc)."""
    if any(k in b.stances and b.stances[k] != v for k, v in a.stances.items()):
        return True
    if a.qualifier != b.qualifier:
        return False
    return any(k in b.slots and b.slots[k] != v for k, v in a.slots.items())


def same_slot(a: FactShape, b: FactShape) -> bool:
    """True when the two facts are about one slot or stance, whatever their values."""
    return bool(set(a.slots) & set(b.slots) or set(a.stances) & set(b.stances))


def about_other_slots(a: FactShape, b: FactShape) -> bool:
    return bool(a.slots and b.slots and not set(a.slots) & set(b.slots))


def opposed(a: FactShape, b: FactShape) -> bool:
    return any(k in b.stances and b.stances[k] != v for k, v in a.stances.items())


def _vocabulary_values(text: str) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    if (m := _LANGUAGE_RE.search(text)) and (_LANGUAGE_CUE_RE.search(text) or f"in {m[1]}" in text):
        found.append(("language", m[1]))
    for slot, patterns in _VOCABULARY.items():
        hits = [(m.start(), value) for pattern, value in patterns if (m := pattern.search(text))]
        if hits:
            found.append((slot, min(hits)[1]))
    return found


def _attribute(attr: str) -> str:
    attr = attr.replace("favorite", "favourite")
    attr = re.sub(r"^(?:current|main|primary|preferred|usual|new) ", "", attr)
    return _ATTRIBUTE_ALIASES.get(attr, attr)


def _value(value: str) -> str:
    value = _DIGIT_GROUP_RE.sub("", value)  # "2,000 euros" (normalised "2 000") = "2000 euros"
    return re.sub(r"^(?:called |set to |the )", "", value).strip()


_DIGIT_GROUP_RE = re.compile(r"(?<=\d) (?=\d{3}\b)")
