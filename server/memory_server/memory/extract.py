"""The offline default extractor: deterministic rules over the user's own sentences.

Only `user_text` is read: what the assistant says is not a fact about the user. Each sentence is
split into clauses (at ";", spaced dashes, and ", and/but/so" or "," before a new first-person
or imperative start), and a clause yields a fact only when it *starts* (after fillers such as
"ok", "actually", "btw", "please", "remember that", "as I said") with one of the forms below.
Anchoring at the start is what keeps other people's words out: "My boss prefers Excel" and
"She said I like jazz" match nothing.

Rewrites (third person, the user's own words kept; me/my/you/your become them/their/the
assistant/the assistant's; "now", "instead", "from now on"... are dropped from the text):

    I prefer|like|love|hate|dislike|enjoy X   → Prefers|Likes|Loves|Hates|Dislikes|Enjoys X
    I don't like X / I can't stand X          → Dislikes X / Can't stand X
    I'm a (big) fan of X / not a fan of X     → Is a fan of X / Dislikes X
    always|never VERB …, I want you to always → Wants the assistant to always|never VERB …
    VERB … / don't VERB … + "from now on"     → Wants the assistant to always|never VERB …
    call me X / I go by X                     → Wants to be called X / Goes by X
    my <attribute> is|are Y                   → <Attribute> is|are Y   ("Timezone is CET")
    I'm a|an X / I work at|for|as|on|in X     → Is a|an X / Works at|for|as|on|in X
    I live in X / I'm based in|from X / I speak X → Lives in X / Is based in|from X / Speaks X
    I|we decided|chose|settled on|switched to X → Decided|Chose|Settled on|Switched to X
    I'm|we're switching to X                  → Is switching to X
    we'll use|go with|stick with|switch to X  → Will use|go with|stick with|switch to X
      (also "I'll …" and "let's …" when said to hold: "from now on", "going forward", "always")
    I'm|we're working on|building|learning|trying to|planning to X → Is working on|… X
    I want|plan|hope|intend|aim to build|learn|become|… X → Wants|Plans|… to build|… X

Kinds: likes/prefers/wants-the-assistant and favourite/preferred/default attributes are
PREFERENCE; decided/chose/switched/will are DECISION; working on/trying to/wants to and goal/project
attributes are GOAL; the rest (name, called, role, team, timezone, works, lives) is IDENTITY.

"my <attribute>" only counts for attributes about the user (name, timezone, role, team,
company, location, language, pronouns, goal, project, stack, ... or favourite/preferred/default
anything): "my query is slow" and "my boss is Ann" are not facts about the user.

Retractions ("forget that I like jazz", "I don't like jazz anymore", "I no longer work at Acme",
"I'm not a student anymore", "forget my timezone", "ignore what I said about coffee", "that's not
true anymore" after a statement or after "you said I ...") give `retraction=True` and the text of
what is retracted in the same form ("Likes jazz", "Timezone", "Coffee").

Skipped: questions (a sentence ending in "?" or opening with an interrogative; "could you
forget that I ..." and "can you remember that I ..." still count), hedges and hypotheticals
(if, maybe, would, I think, used to), one-off scope (for now, today, for this query), other
people's reported words (said, told, thinks, according to, unless the speaker is the user),
and anything recall put in the context: a sentence or fact equal to a recalled text, or whose
content words are >= 80 % in one (retractions are kept: they are about recalled facts).

`change` is set when the sentence says so (actually, now, instead, anymore, no longer, changed
my mind, switch to, these days); "from now on" sets it only when a recalled fact is about the
same slot (see reconcile), since on its own it also starts brand-new instructions.
"""

from __future__ import annotations

import re

from memory_server.memory.facts import Candidate, FactKind
from memory_server.memory.ports import ExtractionInput
from memory_server.memory.restated import Recalled, unique
from memory_server.memory.words import third_singular

NAME = "rules-v1"
_P, _D, _G, _I, _O = (
    FactKind.PREFERENCE,
    FactKind.DECISION,
    FactKind.GOAL,
    FactKind.IDENTITY,
    FactKind.OTHER,
)


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_VERBS = (
    r"answer|reply|respond|use|write|give|show|include|explain|format|keep|add|cite|return|"
    r"speak|talk|be|ask|check|put|start|end|provide|list|mention|link|sort|present|summari[sz]e|"
    r"label|output|avoid|stick|make|comment|quote|convert|translate|spell|assume|remind|tell|"
    r"send|point|reference|suggest|offer|stay|default|limit|wrap|highlight|double-check|number"
)
_SENTENCE_RE = re.compile(r"(?<=[.!?])\s+|\n+")
_STARTS = r"(?:(?:also|actually|honestly|now|then)\s+)?(?:I|I'm|I've|I'll|my|please|always|never|"
_STARTS += rf"call me|let's|we|we're|we'll|that's|that is|from now on|forget|(?:{_VERBS})\b)\b"
_CLAUSE_RE = _rx(rf"\s*;\s*|\s+[—–-]+\s+|,?\s+(?:and|but|so)\s+(?={_STARTS})|,\s+(?={_STARTS})")
_CANON = [
    (re.compile(r"[’‘]"), "'"),
    (re.compile(r"[“”]"), '"'),
    (re.compile(r"\bi(?=\b|')"), "I"),
    (_rx(r"\bI am\b"), "I'm"),
    (_rx(r"\bI would\b"), "I'd"),
    (_rx(r"\bI will\b"), "I'll"),
    (_rx(r"\bwe are\b"), "we're"),
    (_rx(r"\bwe will\b"), "we'll"),
    (_rx(r"\bdo not\b"), "don't"),
    (_rx(r"\bdoes not\b"), "doesn't"),
    (_rx(r"\bcan ?not\b"), "can't"),
    (_rx(r"\blet us\b"), "let's"),
    (_rx(r"\bany (more|longer)\b"), r"any\1"),
    (_rx(r"\bI'd like you to\b"), "I want you to"),
]
_FILLER_RE = _rx(
    r"^(?:ok(?:ay)?|great|cool|thanks|thank you|sure|yes|yeah|yep|no|nope|well|so|and|but|oh|"
    r"hey|hi|hello|hmm|um|btw|by the way|fyi|for the record|just so you know|for context|"
    r"actually|honestly|in fact|to be clear|anyways?|alright|right|one more thing|again|now|"
    r"these days|nowadays|"
    r"from now on|going forward|from here on(?: out)?|please note(?: that)?|note(?: that)?|"
    r"(?:please )?(?:remember|keep in mind)(?: that)?|please|(?:as|like) I (?:said|mentioned)"
    r"(?: before| earlier)?|I (?:already )?(?:said|told you|mentioned)(?: before| earlier)?"
    r"(?: that)?|just|also)\b[\s,:;!.-]*|^[\s\"'*•>-]+"
)
_QUESTION_RE = _rx(
    r"^(?:what|why|how|when|where|which|who|whom|whose|can|could|would|will|should|shall|do|"
    r"does|did|is|are|am|was|were|have|has|had|may|might|must|isn't|aren't|doesn't|didn't|"
    r"won't|wouldn't|can't|couldn't|shouldn't|any idea|is there)\b"
)
_POLITE_RE = _rx(
    r"^(?:can|could|would|will) you (?:please )?(?=forget|disregard|ignore|delete|remember|note)"
)
_HEDGE_RE = _rx(
    r"\b(?:if|suppose|supposing|imagine|assuming|hypothetically|maybe|perhaps|probably|possibly|"
    r"might|could|would|should|wonder|unless|whether|used to|what if|let's say|not sure|I'd|"
    r"I (?:think|guess|believe|suppose|feel like))\b"
)
_EPHEMERAL_RE = _rx(
    r"\b(?:for now|for the moment|right now|today|tonight|this time|temporarily|for this "
    r"(?:one|query|question|answer|chat|conversation|session)|in this (?:chat|conversation|"
    r"session|answer|reply|response))\b"
)
_SELF_REPORT_RE = _rx(r"\b(?:as|like) I (?:said|mentioned)|\bI (?:already )?(?:said|told you)")
_REPORTED_RE = _rx(
    r"\b(?:said|says|saying|told|tells|thinks?|thought|claims?|claimed|wrote|writes|asked|asks|"
    r"believes?|according to|mentioned|heard)\b"
)
_YOU_SAID_RE = _rx(
    r"^you(?: (?:said|say|think|thought|remember(?:ed)?|noted|mentioned|have it|wrote down|"
    r"believe|seem to think)|'ve got it)(?: that)?\s+"
)
_CHANGE_RE = _rx(
    r"\b(?:actually|instead|anymore|no longer|anylonger|changed my mind|change of plans?|"
    r"switch(?:ed|ing)? to|nowadays|these days)\b|(?<!from )(?<!right )(?<!for )\bnow\b(?! on)"
)
_LASTING_RE = _rx(r"\b(?:from now on|going forward|from here on(?: out)?|in (?:the )?future)\b")
_MARKERS_RE = _rx(
    r",?\s*\b(?:from now on|going forward|from here on(?: out)?|in (?:the )?future|instead|"
    r"anymore|anylonger|these days|nowadays|actually|please|now)\b"
)
# A reason or an objection after the fact is not part of it: "Prefers GSQL because ..."
_TAIL_RE = _rx(r"\s*,?\s*\b(?:because|since|but|though|although|so that|which is why)\b.*$")
# Pointing at something in this conversation ("I like this", "the way you explained that",
# "your answers") is feedback on the moment, not a lasting fact.
_DEICTIC_START_RE = _rx(
    r"^(?:it(?! when)|this|that|these|those|them|here|there|him|her|you|your|so)\b"
)
_DEICTIC_RE = _rx(r"\b(?:this|these|those|it)\b")
_POINTING_RE = _rx(r"\b(?:this|these|those)\b|\b(?:that|it|them|one)$")
_ADV = r"(?:(?:really|actually|now|also|still|definitely|generally|usually|mostly|totally|"
_ADV += r"strongly|much|do|honestly|absolutely|just|personally|mainly|truly|currently|always)\s+)*"
_DECIDE = r"use|go with|stick with|switch to|standardi[sz]e on|adopt|migrate to|move to"
_GOAL_VERBS = (
    r"build|create|develop|learn|become|master|migrate|launch|ship|get better at|improve|design|"
    r"deploy|set up|automate|detect|start"
)

_Rule = tuple[re.Pattern[str], str, FactKind, str]


def _rule(pattern: str, template: str, kind: FactKind, mode: str = "strict") -> _Rule:
    """`template` uses the groups: obj (checked, third person), a (lower case), v (a verb, lower
    case). `mode`: "strict" objects hold no this/these/those/it, "loose" ones may ("Hates it
    when ..."), a "name" is capitalised and at most 4 words; "lasting" rules apply only in a
    sentence said to hold ("from now on", "going forward")."""
    return (_rx(pattern), template, kind, mode)


_WANTS = "Wants the assistant to"
_ME = r"^(?:I|we)(?:'ve| have)? " + _ADV
_I_WILL = r"^(?:I'll|I'm going to|let's) "
_IMPERATIVE = rf"(?P<obj>(?:{_VERBS})\b.*)$"
_RULES: list[_Rule] = [
    _rule(r"^(?:you can |always )?call me (?P<obj>[^,]+)$", "Wants to be called {obj}", _I, "name"),
    _rule(r"^I go by (?P<obj>[^,]+)$", "Goes by {obj}", _I, "name"),
    _rule(r"^I want you to (?P<a>always|never) (?P<obj>.+)$", _WANTS + " {a} {obj}", _P, "loose"),
    _rule(r"^(?P<a>always|never)(?: ever)? " + _IMPERATIVE, _WANTS + " {a} {obj}", _P, "loose"),
    _rule(r"^don't ever " + _IMPERATIVE, _WANTS + " never {obj}", _P, "loose"),
    _rule("^" + _IMPERATIVE, _WANTS + " always {obj}", _P, "loose lasting"),
    _rule(r"^don't " + _IMPERATIVE, _WANTS + " never {obj}", _P, "loose lasting"),
    _rule(rf"^I {_ADV}(?P<v>prefer|like|love|hate|dislike|enjoy) (?P<obj>.+)$", "{v}s {obj}", _P,
          "loose"),
    _rule(rf"^I {_ADV}don't {_ADV}like (?P<obj>.+)$", "Dislikes {obj}", _P, "loose"),
    _rule(rf"^I {_ADV}can't stand (?P<obj>.+)$", "Can't stand {obj}", _P, "loose"),
    _rule(r"^I'm (?:a )?(?:big |huge )?fan of (?P<obj>.+)$", "Is a fan of {obj}", _P, "loose"),
    _rule(r"^I'm not (?:a )?(?:big |huge )?fan of (?P<obj>.+)$", "Dislikes {obj}", _P, "loose"),
    _rule(_ME + r"(?P<v>decided|settled on|opted for|committed to) (?P<obj>.+)$", "{v} {obj}", _D),
    _rule(_ME + r"(?:chose|chosen|picked) (?P<obj>.+)$", "Chose {obj}", _D),
    _rule(_ME + r"(?P<v>switched to|moved to|migrated to) (?P<obj>.+)$", "{v} {obj}", _D),
    _rule(rf"^we(?:'ll| shall|'re going to) {_ADV}(?P<a>{_DECIDE}) (?P<obj>.+)$", "Will {a} {obj}",
          _D),
    _rule(
        _I_WILL + r"(?P<a>(?:always )?(?:stick with|standardi[sz]e on)|always "
        + rf"(?:{_DECIDE})) (?P<obj>.+)$",
        "Will {a} {obj}", _D,
    ),
    _rule(_I_WILL + rf"(?P<a>{_DECIDE}) (?P<obj>.+)$", "Will {a} {obj}", _D, "strict lasting"),
    _rule(rf"^(?:I'm|we're) {_ADV}(?P<a>switching to|moving to) (?P<obj>.+)$", "Is {a} {obj}", _D),
    _rule(
        rf"^(?:I'm|we're) {_ADV}(?P<a>working on|building|developing|learning|studying|trying to|"
        r"planning to|hoping to|preparing for|migrating) (?P<obj>.+)$",
        "Is {a} {obj}", _G,
    ),
    _rule(
        rf"^I {_ADV}(?P<v>want|plan|hope|intend|aim) to (?P<a>{_GOAL_VERBS}) (?P<obj>.+)$",
        "{v}s to {a} {obj}", _G,
    ),
    _rule(
        r"^I'm (?P<a>a|an) (?!(?:bit|little|lot|tad|few|couple|quick|question)\b)(?P<obj>.+)$",
        "Is {a} {obj}", _I,
    ),
    _rule(r"^I work (?P<a>at|for|as|on|in) (?P<obj>.+)$", "Works {a} {obj}", _I),
    _rule(r"^I live in (?P<obj>.+)$", "Lives in {obj}", _I),
    _rule(r"^I'm (?P<a>based in|from) (?P<obj>.+)$", "Is {a} {obj}", _I),
    _rule(r"^I'm on the (?P<obj>.+? team)$", "Is on the {obj}", _I),
    _rule(r"^I'm in (?:the )?(?P<obj>\S+) time ?zone$", "Is in the {obj} timezone", _I),
    _rule(r"^I speak (?P<obj>.+)$", "Speaks {obj}", _I),
]  # fmt: skip
_MY_RE = _rx(r"^my (?P<attr>[\w' -]+?) (?P<be>is|are) (?P<obj>.+)$")
_ATTR_NOUNS = _words(
    """name nickname timezone zone tz role job title position team squad company employer org
    organisation organization department location city country hometown language languages
    pronouns birthday background specialty speciality field area domain industry goal goals
    objective aim focus mission project stack editor ide os username handle level expertise
    seniority"""
)
_ATTR_MODIFIERS = _words(
    """full first last preferred main primary current native work home day job time tech team
    research spoken working"""
)
# Only with a modifier: "my main graph is Finance" is about the user, "my graph is X" may not be.
_ATTR_NEEDS_MODIFIER = _words("graph database schema dataset cluster workspace")
_SETTING_MODIFIERS = _words("main primary default current home usual production")
_FAVOURITE = _words("favourite favorite preferred default go-to usual")
_GOAL_NOUNS = _words("goal goals objective aim focus mission project")
_BAD_VALUE_RE = _rx(
    r"^(?:not|too|very|so|really|quite|pretty|kind|sort|still|being|broken|slow|wrong|stuck|"
    r"empty|down|missing|gone|huge|big|small|large|weird|strange|buggy|bad|good|great|awesome|"
    r"terrible|hard|easy|done|late|due|over|on|off|a mess|it|this|that|these|those)\b|^\w+ing\b"
)
_FORGET = r"^(?:forget|disregard|ignore|delete|remove|erase|drop) "
_RETRACT_RULES = [
    (_rx(_FORGET + r"(?:the fact )?that (?P<s>(?:I|my|we)\b.+)$"), "{s}"),
    (
        _rx(
            _FORGET + r"(?:what|everything|anything) I (?:said|told you|mentioned) about (?P<t>.+)$"
        ),
        "t",
    ),
    (_rx(_FORGET + r"my (?P<m>.+)$"), "m"),
    (_rx(r"^I (?:don't|doesn't) (?P<r>.+?),? anymore$"), "I {r}"),
    (_rx(r"^I no longer (?P<r>.+)$"), "I {r}"),
    (_rx(r"^I'm (?:no longer (?P<r>.+)|not (?P<q>.+?),? anymore)$"), "I'm {r}{q}"),
    (
        _rx(r"^my (?P<t>.+?) (?P<be>is|are) (?:no longer (?P<r>.+)|not (?P<q>.+?),? anymore)$"),
        "my {t} {be} {r}{q}",
    ),
]
_REFERENCE_RE = _rx(
    r"^(?:(?:that's|that is) (?:not true|no longer true|not the case|no longer the case|"
    r"outdated)(?: anymore)?|not anymore)$"
)
_PRONOUNS = {
    "i": "they", "me": "them", "my": "their", "mine": "theirs", "myself": "themselves",
    "i'm": "they're", "i've": "they've", "i'll": "they'll", "we": "they", "our": "their",
    "you": "the assistant", "your": "the assistant's", "yours": "the assistant's",
    "you're": "the assistant is", "yourself": "itself",
}  # fmt: skip
_PRONOUN_RE = _rx(r"\b(?:" + "|".join(re.escape(p) for p in _PRONOUNS) + r")(?![\w'])")


class RuleExtractor:
    """Extractor that needs no model: rules over the user's sentences (see module doc)."""

    @property
    def name(self) -> str:
        return NAME

    async def extract(self, turn: ExtractionInput) -> list[Candidate]:
        return self.extract_sync(turn)

    def extract_sync(self, turn: ExtractionInput) -> list[Candidate]:
        recalled = Recalled(turn.recalled)
        out: list[Candidate] = []
        previous: tuple[str, list[Candidate]] | None = None  # what "that's not true" is about
        for raw in _SENTENCE_RE.split(turn.user_text):
            sentence = _canon(raw.strip())
            if not sentence:
                continue
            change = bool(_CHANGE_RE.search(sentence))
            lasting = bool(_LASTING_RE.search(sentence))
            question = sentence.rstrip("\"') ").endswith("?")
            # A hedge, a one-off scope or someone else's words anywhere in the sentence colour
            # all of it: "For this query, I prefer tables" is not a lasting preference.
            unsure = bool(
                _HEDGE_RE.search(_POLITE_RE.sub("", _strip_fillers(sentence)))
                or _EPHEMERAL_RE.search(sentence)
            )
            reported = bool(_REPORTED_RE.search(_SELF_REPORT_RE.sub("", sentence)))
            for part in _CLAUSE_RE.split(sentence.rstrip("?!. ")):
                clause = _strip_fillers(part)
                polite = bool(_POLITE_RE.match(clause))
                clause = _POLITE_RE.sub("", clause)
                if not clause:
                    continue
                found: list[Candidate] = []
                if _REFERENCE_RE.match(clause):
                    if previous is not None and not question:
                        out = [c for c in out if c not in previous[1]]
                        found = _retracted(_statement(previous[0], lasting=False), change)
                elif (gone := _retraction(clause)) is not None:
                    if not unsure and (polite or not question):
                        found = _retracted(gone, change)
                elif not (unsure or reported or _QUESTION_RE.match(clause)) and (
                    polite or not question
                ):
                    found = [
                        Candidate(text, kind, change=change or recalled.same_slot(text, lasting))
                        for text, kind in _statement(clause, lasting=lasting)
                        if not (recalled.repeats(sentence) or recalled.repeats(text))
                    ]
                out.extend(found)
                previous = (clause, found)
        return unique(out)


def _statement(clause: str, *, lasting: bool) -> list[tuple[str, FactKind]]:
    """The fact a first-person clause states, as (text, kind); [] when it states none."""
    clause = _YOU_SAID_RE.sub("", _strip_fillers(clause))
    if _HEDGE_RE.search(clause) or _EPHEMERAL_RE.search(clause) or "?" in clause:
        return []
    for pattern, template, kind, mode in _RULES:
        if ("lasting" in mode and not lasting) or not (m := pattern.match(clause)):
            continue
        obj = _clean(_TAIL_RE.sub("", m["obj"]))
        if (
            not obj
            or len(obj.split()) > (4 if mode == "name" else 16)
            or (mode == "name" and not obj[0].isupper())
            or _DEICTIC_START_RE.match(obj)
            or _POINTING_RE.search(obj)
            or ("strict" in mode and _DEICTIC_RE.search(obj))
        ):
            return []
        parts = {k: v.lower() for k, v in m.groupdict("").items()}
        text = template.format(**(parts | {"obj": _third_person(obj)}))
        return [(_sentence_case(text), kind)]
    if m := _MY_RE.match(clause):
        attr, value = m["attr"].strip(), _clean(_TAIL_RE.sub("", m["obj"]))
        known = _attribute_kind(attr)
        if (
            known is not None
            and value
            and len(value.split()) <= 8
            and not _BAD_VALUE_RE.match(value)
        ):
            text = f"{attr} {m['be'].lower()} {_third_person(value)}"
            return [(_sentence_case(text), known)]
    return []


def _retraction(clause: str) -> list[tuple[str, FactKind]] | None:
    """What a retraction clause retracts (possibly nothing usable); None if it is not one."""
    for pattern, how in _RETRACT_RULES:
        if not (m := pattern.match(clause)):
            continue
        groups = m.groupdict("")
        if how == "t":  # a topic: "ignore what I said about coffee" → "Coffee"
            topic = _clean(re.sub(r"^my\s+", "", groups["t"], flags=re.IGNORECASE))
            return [(_sentence_case(_third_person(topic)), _O)] if topic else []
        if how == "m":  # an attribute: "forget my timezone" → "Timezone"
            attr = _clean(groups["m"])
            kind = _attribute_kind(attr)
            return [(_sentence_case(attr), kind)] if kind is not None else []
        statement = _strip_fillers(how.format(**groups))
        return _statement(statement, lasting=False) or _fallback(statement)
    return None


def _fallback(statement: str) -> list[tuple[str, FactKind]]:
    """A plainer rewrite, for retractions only: a retraction deletes only a fact that matches
    it closely, so a rough form is safe where a rough new fact would not be."""
    if _HEDGE_RE.search(statement) or _DEICTIC_RE.search(statement):
        return []
    if m := re.match(r"^I'm (?P<r>.+)$", statement, re.IGNORECASE):
        return [("Is " + _third_person(_clean(m["r"])), _O)]
    m = re.match(r"^I (?P<v>[a-z]+) (?P<r>.+)$", statement, re.IGNORECASE)
    if m and m["v"].lower() not in {"can't", "will", "was", "did", "do", "have", "had", "said"}:
        verb, rest = third_singular(m["v"].lower()), _third_person(_clean(m["r"]))
        return [(_sentence_case(f"{verb} {rest}"), _O)]
    if m := re.match(r"^my (?P<t>.+?) (?P<be>is|are) (?P<r>.+)$", statement, re.IGNORECASE):
        return [(_sentence_case(f"{m['t']} {m['be']} {_third_person(_clean(m['r']))}"), _O)]
    return []


def _retracted(found: list[tuple[str, FactKind]], change: bool) -> list[Candidate]:
    return [Candidate(text, kind, retraction=True, change=change) for text, kind in found]


def _attribute_kind(attr: str) -> FactKind | None:
    """The kind of "my <attr> is ..." when <attr> is about the user, else None."""
    words = attr.lower().split()
    if not 1 <= len(words) <= 3 or any("'" in w for w in words):
        return None
    *mods, noun = words
    if noun in _ATTR_NOUNS and all(w in _ATTR_MODIFIERS | _FAVOURITE for w in mods):
        return _G if noun in _GOAL_NOUNS else _I
    if mods and mods[0] in _FAVOURITE:
        return _P
    if noun in _ATTR_NEEDS_MODIFIER and mods and all(w in _SETTING_MODIFIERS for w in mods):
        return _I
    return None


def _canon(text: str) -> str:
    for pattern, replacement in _CANON:
        text = pattern.sub(replacement, text)
    return text


def _strip_fillers(clause: str) -> str:
    clause = clause.strip()
    while (stripped := _FILLER_RE.sub("", clause, count=1).strip()) != clause:
        clause = stripped
    return clause


def _clean(text: str) -> str:
    text = _MARKERS_RE.sub("", text)
    return re.sub(r"\s+", " ", text).strip(" \t,;:.!\"'")


def _swap(m: re.Match[str]) -> str:
    return _PRONOUNS[m[0].lower()]


def _third_person(text: str) -> str:
    text = _PRONOUN_RE.sub(_swap, text)
    # "when you use tables" → "when the assistant uses tables"
    return re.sub(
        rf"\bthe assistant ({_VERBS})\b", lambda m: "the assistant " + third_singular(m[1]), text
    )


def _sentence_case(text: str) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    return text[:1].upper() + text[1:]
