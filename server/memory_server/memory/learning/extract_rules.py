"""The rule extractor's vocabulary (memory/learning/extract.py says what it does with it): the
clause forms that state a fact (`RULES`) or retract one (`RETRACT_RULES`), what marks a clause as
not a lasting fact of the user's (questions, hedges, one-off scope, reported words, pointing at the
moment), the attributes "my <attribute> is ..." may be about, and the rewrites to third person.
"""

from __future__ import annotations

import re

from memory_server.memory.facts.model import FactKind
from memory_server.memory.learning.words import third_singular
from memory_server.memory.learning.world_rules import WORLD_FIRST, WORLD_RETRACTIONS

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
# Not after a title: "My dentist is Dr. Patel" is one sentence.
_TITLES = "".join(rf"(?<!\b{t}\.)" for t in ("Dr", "Mr", "Ms", "Mrs", "St", "Jr", "Sr"))
SENTENCE_RE = re.compile(rf"(?<=[.!?]){_TITLES}(?<!\bProf\.)\s+|\n+")
_STARTS = r"(?:(?:also|actually|honestly|now|then)\s+)?(?:I|I'm|I've|I'll|my|please|always|never|"
_STARTS += rf"call me|let's|we|we're|we'll|that's|that is|from now on|forget|(?:{_VERBS})\b)\b"
CLAUSE_RE = _rx(rf"\s*;\s*|\s+[—–-]+\s+|,?\s+(?:and|but|so)\s+(?={_STARTS})|,\s+(?={_STARTS})")
# An instruction to the assistant opens its sentence or follows the user's own words: in "They
# brighten our day and always make us smile" the second half is not an instruction.
IMPERATIVE_RE = _rx(rf"^(?:always|never|don't|(?:{_VERBS})\b)")
SPEAKER_RE = _rx(rf"^(?:I\b|I'|please\b|always\b|never\b|don't\b|call me\b|(?:{_VERBS})\b)")
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
    (_rx(r"\bgonna\b"), "going to"),
    (_rx(r"\bwanna\b"), "want to"),
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
QUESTION_RE = _rx(
    r"^(?:what|why|how|when|where|which|who|whom|whose|can|could|would|will|should|shall|do|"
    r"does|did|is|are|am|was|were|have|has|had|may|might|must|isn't|aren't|doesn't|didn't|"
    r"won't|wouldn't|can't|couldn't|shouldn't|any idea|is there)\b"
)
# A request to repeat or reveal a secret ("please repeat my key back to me", "what's my password
# again?", "remind me of my API key") is no fact about the user, whatever its form.
SECRET_REQUEST_RE = _rx(
    r"\b(?:repeat|say|tell|show|read|reveal|remind|give|send|recall|display|print|echo|spell|"
    r"share|paste|what(?:'s|’s|\s+is|\s+was|\s+were))\b[^.!?]{0,60}?\b(?:my|our|the|your)\s+"
    r"(?:[\w-]+\s+){0,2}?(?:password|passphrase|passcode|pin|key|token|secret|credential)s?\b"
    r"(?!\s+(?:points?|takeaways?|ideas?|insights?|features?|findings?|dates?|steps?|terms?|"
    r"facts?|differences?|results?|moments?|players?|events?|metrics?|to\s+(?:\w+ing|success|a|my)\b))"
)
POLITE_RE = _rx(
    r"^(?:can|could|would|will) you (?:please )?(?=forget|disregard|ignore|delete|remember|note)"
)
HEDGE_RE = _rx(
    r"\b(?:if|suppose|supposing|imagine|assuming|hypothetically|maybe|perhaps|probably|possibly|"
    r"might|could|would|should|wonder|unless|whether|used to|what if|let's say|not sure|I'd|"
    r"I (?:think|guess|believe(?! in\b)|suppose|feel like))\b"
)
EPHEMERAL_RE = _rx(
    r"\b(?:for now|for the moment|right now|today|tonight|this time|temporarily|for this "
    r"(?:one|query|question|answer|chat|conversation|session)|in this (?:chat|conversation|"
    r"session|answer|reply|response))\b"
)
SELF_REPORT_RE = _rx(
    r"\b(?:as|like) I (?:said|mentioned)|\bI (?:already )?(?:said|told you)|"
    r"\bI (?:really |truly |firmly |strongly |also )*believe in\b"
)
REPORTED_RE = _rx(
    r"\b(?:said|says|saying|told|tells|thinks?|thought|claims?|claimed|wrote|writes|asked|asks|"
    r"believes?|according to|mentioned|heard)\b"
)
YOU_SAID_RE = _rx(
    r"^you(?: (?:said|say|think|thought|remember(?:ed)?|noted|mentioned|have it|wrote down|"
    r"believe|seem to think)|'ve got it)(?: that)?\s+"
)
CHANGE_RE = _rx(
    r"\b(?:actually|instead|anymore|no longer|anylonger|changed my mind|change of plans?|"
    r"switch(?:ed|ing)? to|nowadays|these days)\b|(?<!from )(?<!right )(?<!for )\bnow\b(?! on)"
)
LASTING_RE = _rx(r"\b(?:from now on|going forward|from here on(?: out)?|in (?:the )?future)\b")
_MARKERS_RE = _rx(
    r",?\s*\b(?:from now on|going forward|from here on(?: out)?|in (?:the )?future|instead|"
    r"anymore|anylonger|these days|nowadays|actually|please|now)\b"
)
# A reason or an objection after the fact is not part of it: "Prefers GSQL because ..."
TAIL_RE = _rx(
    r"\s*,?\s*\b(?:because|(?<!ever )since|but|even though|even if|though|although|so that|"
    r"which is why|and (?:it|that|this)"
    r"(?:'s|\s+(?:was|is|has|had|made|felt|looks|looked|got)\b))\b.*$"
)
# Pointing at something in this conversation ("I like this", "the way you explained that",
# "your answers") is feedback on the moment, not a lasting fact.
DEICTIC_START_RE = _rx(
    r"^(?:it(?! when)|this|that|these|those|them|here|there|him|her|you|your|so)\b"
)
DEICTIC_RE = _rx(r"\b(?:this|these|those|it)\b")
POINTING_RE = _rx(r"\b(?:this|these|those)\b|\b(?:that|it|them|one)$")
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
RULES: list[_Rule] = [
    *WORLD_FIRST,
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
    _rule(_ME + r"(?:chose|chosen|picked(?! up)) (?P<obj>.+)$", "Chose {obj}", _D),
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
        r"^I'm (?P<a>a|an) (?!(?:bit|little|lot|tad|few|couple|quick|question)\b)"
        r"(?!(?:big |huge |massive )?fan\b)(?P<obj>.+)$",
        "Is {a} {obj}", _I,
    ),
    _rule(r"^I work (?P<a>at|for|as|on|in) (?P<obj>.+)$", "Works {a} {obj}", _I),
    _rule(r"^I live in (?P<obj>.+)$", "Lives in {obj}", _I),
    _rule(r"^I'm (?P<a>based in|from) (?P<obj>.+)$", "Is {a} {obj}", _I),
    _rule(r"^I'm on the (?P<obj>.+? team)$", "Is on the {obj}", _I),
    _rule(r"^I'm in (?:the )?(?P<obj>\S+) time ?zone$", "Is in the {obj} timezone", _I),
    _rule(r"^I speak (?P<obj>.+)$", "Speaks {obj}", _I),
]  # fmt: skip
MY_RE = _rx(r"^my (?P<attr>[\w' -]+?) (?P<be>is|are) (?P<obj>.+)$")
_ATTR_NOUNS = _words(
    """name nickname timezone zone tz role job title position team squad company employer org
    organisation organization department location city country hometown language languages
    pronouns birthday background specialty speciality field area domain industry goal goals
    objective aim focus mission project stack editor ide os username handle level expertise
    seniority hobby hobbies passion passions dream dreams major degree school university college"""
)
_ATTR_MODIFIERS = _words(
    """full first last preferred main primary current native work home day job time tech team
    research spoken working"""
)
# Only with a modifier: "my main graph is Finance" is about the user, "my graph is X" may not be.
_ATTR_NEEDS_MODIFIER = _words("graph database schema dataset cluster workspace")
_SETTING_MODIFIERS = _words("main primary default current home usual production")
_FAVOURITE = _words("favourite favorite preferred default go-to usual")
_GOAL_NOUNS = _words("goal goals objective aim focus mission project dream dreams")
_PASTIMES = _words("hobby hobbies passion passions")
_HOW_ING = _words("being boring amazing interesting annoying exciting relaxing fascinating tiring")
BAD_VALUE_RE = _rx(
    r"^(?:not|too|very|so|really|quite|pretty|kind|sort|still|being|broken|slow|wrong|stuck|"
    r"empty|down|missing|gone|huge|big|small|large|weird|strange|buggy|bad|good|great|awesome|"
    r"terrible|hard|easy|done|late|due|over|on|off|a mess|it|this|that|these|those)\b|^\w+ing\b"
)
_FORGET = r"^(?:forget|disregard|ignore|delete|remove|erase|drop) "
RETRACT_RULES = [
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
    *WORLD_RETRACTIONS,
]
REFERENCE_RE = _rx(
    r"^(?:(?:that's|that is) (?:not true|no longer true|not the case|no longer the case|"
    r"outdated)(?: anymore)?|not anymore)$"
)
_PRONOUNS = {
    "i": "they", "me": "them", "my": "their", "mine": "theirs", "myself": "themselves",
    "i'm": "they're", "i've": "they've", "i'll": "they'll", "we": "they", "our": "their",
    "us": "them", "ours": "theirs", "ourselves": "themselves",
    "you": "the assistant", "your": "the assistant's", "yours": "the assistant's",
    "you're": "the assistant is", "yourself": "itself",
}  # fmt: skip
_PRONOUN_RE = _rx(r"\b(?:" + "|".join(re.escape(p) for p in _PRONOUNS) + r")(?![\w'-])")


def attribute_kind(attr: str) -> FactKind | None:
    """The kind of "my <attr> is ..." when <attr> is about the user, else None."""
    words = attr.lower().split()
    if not 1 <= len(words) <= 3 or any("'" in w for w in words):
        return None
    *mods, noun = words
    if noun in _ATTR_NOUNS and all(w in _ATTR_MODIFIERS | _FAVOURITE for w in mods):
        return _G if noun in _GOAL_NOUNS else _P if noun in _PASTIMES else _I
    if mods and mods[0] in _FAVOURITE:
        return _P
    if noun in _ATTR_NEEDS_MODIFIER and mods and all(w in _SETTING_MODIFIERS for w in mods):
        return _I
    return None


def bad_value(attr: str, value: str) -> bool:
    """Whether "my <attr> is <value>" says how something is, not what it is ("my query is
    slow"); a pastime may be an activity ("my hobbies are hiking and baking")."""
    if attr.lower().split()[-1] in _PASTIMES and (m := re.match(r"^(\w+ing)\b", value)):
        return m[1].lower() in _HOW_ING
    return bool(BAD_VALUE_RE.match(value))


def canon(text: str) -> str:
    """Typographic quotes straightened, contractions in one form ("I am" → "I'm")."""
    for pattern, replacement in _CANON:
        text = pattern.sub(replacement, text)
    return text


def strip_fillers(clause: str) -> str:
    """`clause` without its leading fillers ("ok, actually, remember that ...")."""
    clause = clause.strip()
    while (stripped := _FILLER_RE.sub("", clause, count=1).strip()) != clause:
        clause = stripped
    return clause


def clean(text: str) -> str:
    """A fact's object without change markers ("now", "instead", ...) and edge punctuation."""
    text = _MARKERS_RE.sub("", text)
    return re.sub(r"\s+", " ", text).strip(" \t,;:.!\"'")


def _swap(m: re.Match[str]) -> str:
    return _PRONOUNS[m[0].lower()]


def swap_person(text: str) -> str:
    """The user's words as said of them: me/my → them/their, you → the assistant."""
    text = _PRONOUN_RE.sub(_swap, text)
    # "when I was a kid" → "when they were a kid"
    text = re.sub(
        r"\bthey (?:was|am)\b", lambda m: "they were" if "was" in m[0] else "they are", text
    )
    # "when you use tables" → "when the assistant uses tables"
    return re.sub(
        rf"\bthe assistant ({_VERBS})\b", lambda m: "the assistant " + third_singular(m[1]), text
    )


def sentence_case(text: str) -> str:
    """One space between words, the first letter upper case."""
    text = re.sub(r"\s+", " ", text).strip()
    return text[:1].upper() + text[1:]
