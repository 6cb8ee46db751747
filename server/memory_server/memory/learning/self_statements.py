"""What the user says of their own life outside the rule forms, kept close to their words.

The forms of memory/learning/extract_rules.py and memory/learning/world_rules.py read the statements
that have a shape ("my manager is Tom", "I moved to Lisbon", "I ran a marathon last Sunday"). Most
of what people tell about themselves has none: "Pottery is a huge part of my life", "I've been
working hard on my online store and teamed up with a local artist", "We usually watch a few movies
at Thanksgiving". A sentence the forms left alone is kept as a fact, in third person, when all of
these hold:

- it is a plain statement: no question, hedge, hypothetical or one-off scope, no reported
  words (the sentence-level checks of the rule extractor), no "will", "can", "let's", and it
  does not open with an instruction to the listener ("check out", "look at", "thanks");
- it is about the speaker: "I", "me", "my", "we", "us" or "our" is in it, and it does not
  open with someone else ("my sister ...", "he ...", "our kids ...");
- it is not about the listener or the talk: no "you"/"your" ("I'm so proud of you"), no
  feeling of the moment at its start ("I'm glad", "I agree", "I can't wait", "I hope"), no
  "since we last talked", nothing about the moment's work (the world rules' technical
  objects, and the verbs of `UNDATED_NOT_EVENTS`: "I installed pandas");
- it says something: at least `MIN_CONTENT_WORDS` words that are not function words, light
  verbs or small talk ("I had a great time" has two), and at most `MAX_WORDS` words.

A sentence that opens with a pointer ("It helps me relax", "That's why I paint") says nothing
alone; it is read together with the sentence before it in the same message ("Painting is my
escape. It helps me relax."), and the pair replaces the fact the first one gave, if any. That
sentence must say something itself (two words that do) and must not open with a pointer or be
a question: "Yep, John. These reminders help us" and "That's great. It gives me hope" give
nothing, and in "... It calms me. It's cheaper" the second pointer has nothing to point at.

The rewrite keeps the user's words: a leading "I"/"we" is dropped with its verb put in third
person ("I usually watch" → "Usually watches", "I'm" → "Is", "I've" → "Has"), the other
first- and second-person words are swapped as everywhere else ("my" → "their").
"""

from __future__ import annotations

import re

from memory_server.memory.facts.shape import PEOPLE, words
from memory_server.memory.learning.extract_rules import (
    EPHEMERAL_RE,
    HEDGE_RE,
    IMPERATIVE_RE,
    POLITE_RE,
    QUESTION_RE,
    SELF_REPORT_RE,
    canon,
    clean,
    sentence_case,
    strip_fillers,
    swap_person,
)
from memory_server.memory.learning.words import third_singular
from memory_server.memory.learning.world_rules import (
    IRREGULAR_PAST,
    SECOND_PERSON_RE,
    TECHNICAL_RE,
    UNDATED_NOT_EVENTS,
    elided_subject,
)

MIN_CONTENT_WORDS = 3
MAX_WORDS = 30


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


_FIRST_PERSON_RE = _rx(r"\b(?:I|I'm|I've|I'd|me|my|mine|myself|we|we're|we've|us|our|ours)\b")
_OTHERS = "|".join(sorted(PEOPLE | {"family", "fam", "kid", "parent", "folk", "team", "teammate"}))
# Someone else is the subject: "my sister went ...", "our kids love ...", "he moved ...".
_OTHER_SUBJECT_RE = _rx(
    rf"^(?:(?:my|our)\s+(?:\w+\s+)?(?:{_OTHERS})s?\b|(?:he|she|they|his|her|their)\b)"
)
# A feeling or reaction of the moment, or small talk, at the start.
_MOMENT_RE = _rx(
    r"^(?:I|we)(?:'m|'re| am| are)?\s+(?:(?:so|really|very|super|totally|just|also|too|"
    r"definitely|truly)\s+)*(?:glad|happy|sorry|proud|thrilled|sure|thankful|grateful|stoked|"
    r"pumped|impressed|amazed|touched|honou?red|curious|agree|understand|"
    r"appreciate|can't wait|hope|wish|guess|bet|mean|feel|miss|doing (?:well|good|great|fine|ok)|"
    r"(?:love|like) (?:it|that|this|them))\b"
)
# What is not a statement of how things are: a promise, an ability, a suggestion, small talk.
_NOT_STATED_RE = _rx(
    r"^let's\b|\b(?:will|won't|'ll|can|can't|cannot|gotta)\b|"
    r"\bsince (?:we|I) (?:last )?(?:talked|chatted|spoke|caught up)\b|"
    r"\b(?:long time no|catch up|talk soon|keep it up|rest assured)\b"
)
_FUTURE_RE = _rx(r"^(?:I|we)(?:'ll|'d| need| have to| want)\b")
# Said for a while only ("for now"): the rule extractor's one-off scope, less "today" and
# "tonight", which here date what happened ("I took my turtles out for a walk today").
_ONE_OFF_RE = _rx(EPHEMERAL_RE.pattern.replace("today|tonight|", ""))
# A hedge or a hypothetical, less "used to": what the user used to do is a fact of their past
# ("I used to compete in dance competitions" → "Used to compete in dance competitions").
_HEDGE_RE = _rx(HEDGE_RE.pattern.replace("used to|", ""))
# Opens with a pointer (needs the sentence before it) or speaks to the listener.
# "This plaque on my desk ..." names what it is about; "This is ...", "That helps ...",
# "These reminders ..." point.
_POINTING = r"is|was|has|had|really|just|also|all|one|kind|sort|stuff|thing"
_POINTING += r"|made|gave|brought|kept|helped|reminded|meant"
POINTER_RE = _rx(
    rf"^(?:it|it's|here|here's|there|there's|these|those)\b|^(?:this|that)(?:'s\b|\s+(?:{_POINTING})\b|"
    rf"\s+[a-z]+[^s\W]s\b)"
)
# Someone else's words or views ("my mom thinks", "he told me"); "deep in thought" and "to
# believe in myself" are not reports, nor is "I thought about it".
_REPORTED_RE = _rx(
    r"\b(?:said|says|saying|told|tells|claims?|claimed|according to|asked|asks|mentioned|heard|"
    r"wrote|writes)\b|(?<!\bI )(?<!\bin )(?<!\bto )(?<!\ba )\b(?:thinks|thought|believes)\b|"
    r"\b(?:he|she|they|people|everyone|someone) (?:\w+ )?(?:think|believe)\b"
)
_TO_LISTENER_RE = _rx(
    r"^(?:check|look|take|see|imagine|guess|tell|keep|thanks|thank|show|give|find|help|run|"
    r"compute|count|draw|plot|compare|let|try|fix|create|build|generate|get|don't|do|trust|"
    r"sorry|appreciate|sounds|glad|congrats|congratulations|good luck|welcome|cheers|wow)\b"
)
_VOCATIVE_RE = re.compile(r"^[A-Z][a-z]+,\s+")  # "Maria, I learn a lot ..."
_ADVERBS = (
    r"even|also|just|really|finally|usually|always|never|still|recently|actually|totally|"
    r"definitely|sometimes|often|already|truly|both|all"
)
_LEAD_RE = _rx(rf"^(?:I|we)\s+(?P<adv>(?:(?:{_ADVERBS})\s+)*)(?P<v>[a-z]+)\b(?P<rest>.*)$")
# Past forms that take no "-s" when the "I" goes ("I felt" → "Felt").
_PAST = IRREGULAR_PAST | words(
    """felt kept thought told said knew wrote read heard sent forgot forgave drew blew withdrew
    fell chose spoke stole froze woke rose shook slept stood understood sat hung dug stuck
    struck spun hid fed led fled shot lit slid dealt meant lent bent burnt dreamt learnt
    knelt leapt sought tore swore overcame mistook undertook"""
)
_SMALL = words(
    """i i'm i've i'd i'll me my mine myself we we're we've us our ours you your it it's its this
    that these those the a an and or but so to of in on at for with from by as about into over
    after before up down out off than then is am are was were be been being have has had having
    do does did done get got getting go going went make made really very just too also still
    even much more most some any all lot lots bit kind sort way thing things stuff there here
    what when where which who how why not no yes yeah oh wow hey hi thanks thank like totally
    such can could would should will shall may might must one ones time great good nice awesome
    cool amazing fun him her them he she they his hers their each other someone something
    anything everything yesterday today"""
)


def meaningful_words(text: str) -> list[str]:
    """The words of `text` that say something (not function words, light verbs, small talk)."""
    return [w for w in re.findall(r"[a-z][a-z'-]+", text.lower()) if w not in _SMALL]


# Where a long sentence that says nothing as a whole may be cut into parts that do.
_PARTS_RE = _rx(r"\s*;\s*|\s+[—–-]+\s+|,\s+(?:but|so)\s+|\s+because\s+")


def self_statements(sentence: str, before: str = "") -> list[str]:
    """The facts a sentence the rule forms left alone states of the speaker: the sentence as
    one fact, or else each of its parts (split at ";", dashes, ", but", ", so" and "because")
    that states one on its own."""
    if (whole := self_statement(sentence, before)) is not None:
        return [whole]
    out: list[str] = []
    parts = [p for p in _PARTS_RE.split(sentence) if p.strip()]
    if len(parts) > 1:
        for i, part in enumerate(parts):
            if (text := self_statement(part, parts[i - 1] if i else before)) is not None:
                out.append(text)
    return out


def self_statement(sentence: str, before: str = "") -> str | None:
    """The fact a sentence the rule forms left alone states of the speaker, or None (see the
    module doc). `before` is the sentence before it in the message, read with a sentence that
    opens with a pointer; such a sentence gives nothing without it."""
    core = _VOCATIVE_RE.sub("", POLITE_RE.sub("", strip_fillers(canon(sentence.strip()))))
    if not core or core.rstrip("\"') ").endswith("?"):
        return None
    if POINTER_RE.match(core):
        # What it points at is said in the sentence before, which must say something itself
        # ("Yep, John. These reminders help us" has nothing to point at) and point at nothing.
        before = _VOCATIVE_RE.sub("", strip_fillers(canon(before.strip())))
        if (
            len(meaningful_words(before)) < 2
            or POINTER_RE.match(before)
            or _TO_LISTENER_RE.match(before)
            or before.rstrip("\"') ").endswith("?")
        ):
            return None
        core = f"{before} {core}"
    core = elided_subject(core)
    if (
        QUESTION_RE.match(core)
        or _HEDGE_RE.search(core)
        or _ONE_OFF_RE.search(core)
        or _REPORTED_RE.search(SELF_REPORT_RE.sub("", core))
        or _NOT_STATED_RE.search(core)
        or not _FIRST_PERSON_RE.search(core)
        or SECOND_PERSON_RE.search(core)
        or _TO_LISTENER_RE.match(core)
        or IMPERATIVE_RE.match(core)
        or _OTHER_SUBJECT_RE.match(core)
        or _MOMENT_RE.match(core)
        or _FUTURE_RE.match(core)
        or TECHNICAL_RE.search(core)
        or len(meaningful_words(core)) < MIN_CONTENT_WORDS
        or ((lead := _LEAD_RE.match(core)) and lead["v"].lower() in UNDATED_NOT_EVENTS)
    ):
        return None
    text = swap_person(clean(_third_person(core)))
    if len(text.split()) > MAX_WORDS:
        return None
    return sentence_case(text)


def _third_person(sentence: str) -> str:
    """`sentence` without its leading "I"/"we", its verb said of the speaker."""
    if m := re.match(r"^(?:I|we)(?:'m| am|'re| are)\s+(.*)$", sentence, re.IGNORECASE):
        return "Is " + m[1]
    if m := re.match(r"^(?:I|we)'ve\s+(.*)$", sentence, re.IGNORECASE):
        return "Has " + m[1]
    if m := re.match(r"^(?:I|we)\s+(?:was|were)\s+(.*)$", sentence, re.IGNORECASE):
        return "Was " + m[1]
    if m := _LEAD_RE.match(sentence):
        verb = m["v"].lower()
        if not (verb.endswith("ed") or verb in _PAST or m["rest"].startswith("'")):
            verb = third_singular(verb)
        return f"{m['adv']}{verb}{m['rest']}"
    return sentence
