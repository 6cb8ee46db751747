"""mem0's memories as our Candidates.

Only those attributed to the user are kept (assistant-sourced ones such as "User was
recommended X" are dropped), rewritten to the rule extractor's third-person style ("User
prefers X" → "Prefers X", "User's timezone is CET" → "Timezone is CET"), with a kind from
`fact_kind`, `change` when the memory or the user's sentence it came from announces a change,
and facts that repeat a recalled text left out. mem0 cannot express a retraction: a "User no
longer likes jazz" memory becomes a retraction of "Likes jazz", other negations of the past are
dropped (they would pile up beside the fact they negate), and the rule extractor's retractions
of the user's own words ("forget that I ...") are added.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from memory_server.memory.facts.model import Candidate, FactKind
from memory_server.memory.facts.restated import Recalled, unique
from memory_server.memory.facts.shape import normalise
from memory_server.memory.learning.extract import RuleExtractor
from memory_server.memory.learning.words import content_words, third_singular
from memory_server.memory.ports import ExtractionInput

MAX_CANDIDATES = 20
MAX_FACT_CHARS = 400


@dataclass(frozen=True, slots=True)
class Found:
    """One memory as mem0 wrote it."""

    text: str
    attributed_to: str | None


def to_candidates(
    found: Sequence[Found], turn: ExtractionInput, rules: RuleExtractor
) -> list[Candidate]:
    """mem0's memories as Candidates (see the module doc), then the rule extractor's
    retractions."""
    recalled = Recalled(turn.recalled)
    sentences = _Sentences(turn.user_text)
    out: list[Candidate] = []
    for item in found:
        if item.attributed_to not in (None, "", "user") or _FROM_ASSISTANT_RE.search(item.text):
            continue
        text = third_person(item.text)
        if not text or len(text) > MAX_FACT_CHARS:
            continue
        change = bool(_CHANGE_RE.search(item.text)) or sentences.announces_change(item.text)
        retracted = _retracted(text)
        if retracted is not None:
            out.append(Candidate(retracted, fact_kind(retracted), retraction=True, change=change))
        elif not _NEGATED_PAST_RE.search(text) and not recalled.repeats(text):
            out.append(Candidate(text, fact_kind(text), change=change))
    out.extend(c for c in rules.extract_sync(turn) if c.retraction)
    return unique(out)[:MAX_CANDIDATES]


_FROM_ASSISTANT_RE = re.compile(
    r"^(?:the )?user (?:was|were|got|has been) (?:recommended|suggested|advised|told|given|"
    r"shown|sent|offered|provided|reminded)\b|\bthe assistant (?:recommended|suggested|"
    r"provided|explained|created|proposed|offered)\b",
    re.IGNORECASE,
)
_SUBJECT_RE = re.compile(r"^(?:the )?user(?P<own>['’]s)?\s+(?:(?:now|currently)\s+)?", re.I)
_CHANGE_RE = re.compile(
    r"\b(?:actually|instead|anymore|any more|any longer|no longer|changed (?:my|their|his|her) "
    r"mind|change of plans?|switch(?:ed|ing)? (?:to|from)|nowadays|these days)\b|"
    r"(?<!from )(?<!right )(?<!for )\bnow\b(?! on)",
    re.IGNORECASE,
)
_RETRACTED_RES = [
    (re.compile(r"^no longer (?P<rest>.+)$", re.I), "{rest}"),
    (re.compile(r"^is no longer (?P<rest>.+)$", re.I), "Is {rest}"),
    (re.compile(r"^is not (?P<rest>.+?),? (?:anymore|any more|any longer)$", re.I), "Is {rest}"),
    (
        re.compile(
            r"^(?:does not|doesn't) (?P<verb>[a-z]+) (?P<rest>.+?),? (?:anymore|any more|"
            r"any longer)$",
            re.I,
        ),
        "{verb} {rest}",
    ),
]
# A negation of the past that is not one of the forms above: as a fact it would only pile up
# beside the fact it negates, and the user's own retraction is left to the rules.
_NEGATED_PAST_RE = re.compile(
    r"\b(?:no longer|anymore|any more|any longer|forget|forgot|stopped|used to)\b", re.I
)
_SENTENCE_RE = re.compile(r"(?<=[.!?])\s+|\n+")


def third_person(text: str) -> str:
    """mem0's "User prefers X." as the rule extractor writes it: "Prefers X"; "User's
    timezone is CET" → "Timezone is CET". Text without the "User" subject is kept."""
    text = re.sub(r"\s+", " ", text).strip().rstrip(".").strip()
    text = _SUBJECT_RE.sub("", text, count=1)
    return text[:1].upper() + text[1:]


def _retracted(text: str) -> str | None:
    for pattern, template in _RETRACTED_RES:
        if m := pattern.match(text):
            parts = m.groupdict()
            if "verb" in parts:
                parts["verb"] = third_singular(parts["verb"].lower())
            out = template.format(**parts).strip()
            return out[:1].upper() + out[1:] if out else None
    return None


_KIND_RES: list[tuple[FactKind, re.Pattern[str]]] = [
    (
        FactKind.IDENTITY,
        re.compile(r"^(?:wants to be called|goes by|(?:full |first |last )?name is|is called)\b"),
    ),
    (
        FactKind.PREFERENCE,
        re.compile(
            r"^(?:prefers|likes|loves|enjoys|hates|dislikes|detests|avoids|(?:does not|doesn't) "
            r"(?:like|want|enjoy)|can't stand|cannot stand|is (?:not )?(?:a )?(?:big |huge )?"
            r"fan of|wants (?:the assistant|answers|responses|replies|explanations|code|"
            r"examples|output)|would (?:rather|like the assistant)|(?:favou?rite|preferred|"
            r"default|usual|go-to) [\w' -]+ (?:is|are))\b"
        ),
    ),
    (
        FactKind.DECISION,
        re.compile(
            r"^(?:(?:has )?(?:decided|chosen|chose|picked|selected|settled on|opted|committed|"
            r"switched|moved|migrated|adopted|standardi[sz]ed)|is (?:switching|moving|"
            r"migrating) to|will (?:use|go with|stick with|switch to|adopt|migrate to|move to|"
            r"standardi[sz]e on))\b"
        ),
    ),
    (
        FactKind.GOAL,
        re.compile(
            r"^(?:is (?:working on|building|developing|learning|studying|trying to|planning|"
            r"hoping to|preparing|aiming to|writing|creating|designing|migrating|setting up)|"
            r"wants to|plans to|hopes to|intends to|aims to|is going to|(?:main |current |"
            r"primary )?(?:goal|goals|objective|aim|focus|mission|project)s? (?:is|are))\b"
        ),
    ),
    (
        FactKind.IDENTITY,
        re.compile(
            r"^(?:is (?:a|an|the)|works|worked|lives|is based|is from|is located|speaks|"
            r"is on the|is in the|is part of|has worked|has been (?:a|an|working)|"
            r"(?:native |spoken )?(?:role|job|job title|title|position|team|company|employer|"
            r"timezone|time zone|location|city|country|hometown|pronouns|language|languages|"
            r"nationality|username|handle|age|birthday|background|expertise|specialty|"
            r"seniority|level) (?:is|are))\b"
        ),
    ),
]


def fact_kind(text: str) -> FactKind:
    """The kind of a fact written in the third-person style ("Prefers ...", "Decided ...",
    "Is building ...", "Works at ..."): preference, decision, goal, identity, else other."""
    lowered = normalise(text)
    for kind, pattern in _KIND_RES:
        if pattern.match(lowered):
            return kind
    return FactKind.OTHER


class _Sentences:
    """The user's sentences, to find the one a memory came from."""

    def __init__(self, user_text: str) -> None:
        self._sentences = [s for s in _SENTENCE_RE.split(user_text) if s.strip()]
        self._words = [content_words(s) for s in self._sentences]

    def announces_change(self, memory: str) -> bool:
        mine = content_words(memory)
        if not mine or not self._sentences:
            return False
        overlap = [len(mine & words) for words in self._words]
        best = max(overlap)
        return best > 0 and bool(_CHANGE_RE.search(self._sentences[overlap.index(best)]))
