"""Whether a fact the rule extractor read is worth keeping: the written rules of
bench/fact_quality/RULES.md, as cheap checks on the fact's own words.

A good fact
  R1 names its subject or is plainly about the user: no pointer whose referent is not in it
     ("Read it a while back", "Loves how they take them to other places", "Made strong
     connections with people there");
  R2 says one thing: a comment after it ("... last week. It was amazing", ", it's been pretty
     cool", ", take a look") is cut off (`tidy`), not kept as a second claim;
  R3 is not small talk or a reaction: no feeling of the moment or pep talk ("Is so lucky to be a
     part of this team", "Is going to keep pushing forward", "Is staying positive"), no
     platitude ("Nature sure has a way of leaving them speechless", "Being around people who
     back them up is beyond words"), nothing about the listener ("Loves how the assistant uses
     it to ...");
  R4 says something specific: at least two words that say what, who, where or when beyond
     light verbs, evaluations and time words ("Went to an event", "Had a great time last
     weekend", "Tackled something new yesterday" say nothing a later question could use);
  R5 is well formed ("Mays have found a job", "Both knows it took some effort", "Of getting
     stuck in that moment ..."): the marks of a rewrite gone wrong;
  R6 is not a restatement of a live fact (memory/facts/restated.py decides that against the
     scope's facts; this module sees one text).

`verdict` returns the first rule a text breaks, or None for a good one. The rules read the text
in third person as the extractor writes it ("they", "them", "their" are the user), so they
apply to the rule forms and the self statements alike; an instruction to the assistant ("Wants
the assistant to always ...") is never judged by them.
"""

from __future__ import annotations

from enum import StrEnum

from memory_server.memory.facts.shape import PEOPLE
from memory_server.memory.learning.quality_rules import (
    DEGREE_RE,
    DEMONSTRATIVES,
    EMPTY,
    EVALUATION_END_RE,
    EVALUATION_TAIL_RE,
    FEELING_RE,
    FIGURE_RE,
    FIRST_SENTENCE_POINTER_RE,
    GARBLED_RE,
    GENERIC,
    INTRODUCED_RE,
    IT_WHEN_RE,
    LISTENER_RE,
    LUCKY_RE,
    MIN_WORDS,
    MOMENT_RE,
    MORE_RE,
    NAME_RE,
    NAMED_RE,
    NOUN_NEXT_RE,
    OPENER_RE,
    OPENING_DEMONSTRATIVE_RE,
    PEP_TALK_RE,
    PERSONAL,
    PLATITUDE_RE,
    POINTER_RE,
    REACTION_RE,
    SENTENCE_END_RE,
    SHOWN,
    SOMETHING_RE,
    SUBJECT_FIRST_RE,
    TAIL_RE,
    THAT_NOUNS,
    THEM_OBJECT_RE,
    TIME_RE,
    UNNAMED_POINTER_RE,
)
from memory_server.memory.learning.self_statements import meaningful_words
from memory_server.memory.learning.world_rules import DATED_RE, UNDATED_NOT_EVENTS


class Broken(StrEnum):
    """The rule a fact breaks (bench/fact_quality/RULES.md)."""

    SUBJECT = "R1"  # a pointer with nothing to point at
    SMALL_TALK = "R3"  # small talk, a reaction, a feeling of the moment, a platitude
    VAGUE = "R4"  # nothing specific
    GARBLED = "R5"  # a rewrite gone wrong


def tidy(text: str) -> str:
    """`text` as one claim: its first sentence, without a trailing comment or opener, and the
    sentence after it when that one tells more of the same thing ("Painting is their escape.
    It helps them relax after work"), not how it felt ("... last week. It was amazing")."""
    text = OPENER_RE.sub("", text.strip())
    first, *rest = SENTENCE_END_RE.split(text, maxsplit=2)
    first = _clip(first)
    if not first:
        return text
    if rest and (second := _clip(rest[0])) and _says_more(second):
        first = f"{first}. {second}"
    return first[:1].upper() + first[1:]


def _clip(sentence: str) -> str:
    """A sentence without a comment at its end: one that says how it was, or little else."""
    sentence = sentence.strip().rstrip(" .!?")
    if (m := TAIL_RE.search(sentence)) and (len(_specific(m[0])) <= 2 or FEELING_RE.search(m[0])):
        sentence = sentence[: m.start()].rstrip(" ,;:-–—")
    return EVALUATION_TAIL_RE.sub("", sentence)


def _says_more(sentence: str) -> bool:
    """Whether a sentence after a fact tells more of it: it points back at it ("It helps them
    relax after work") and says something specific that is not how it felt."""
    return bool(
        MORE_RE.match(sentence)
        and _specific(sentence)
        and not (
            PEP_TALK_RE.search(sentence)
            or EVALUATION_END_RE.search(sentence)
            or FEELING_RE.search(sentence)
        )
    )


def verdict(text: str, *, shaped: bool = False, event: bool = False) -> Broken | None:
    """The first rule of the module doc that `text` (a fact in third person) breaks, or None
    when it keeps them all. `shaped`: a rule form's fact ("Is a nurse", "Hates it when the
    assistant ..."), whose form already says what it is about: only R3's feelings, pep talk and
    platitudes and R5 apply. Instructions to the assistant are never judged."""
    if text.startswith("Wants the assistant to"):
        return None
    if GARBLED_RE.search(text):
        return Broken.GARBLED
    if (
        LUCKY_RE.match(text)
        or (
            (m := MOMENT_RE.match(text))
            and len(_specific(SENTENCE_END_RE.split(text[m.end() :], maxsplit=1)[0])) < 2
        )
        or PEP_TALK_RE.search(text)
        or PLATITUDE_RE.match(text)
    ):
        return Broken.SMALL_TALK
    if shaped:  # "Hates it when the assistant ..." is a form's, and says what "it" is
        if _unresolved(IT_WHEN_RE.sub("", text)):
            return Broken.SUBJECT
        # A form's fact may be short ("Is a nurse"), not empty ("Is working on a new project").
        return None if _specific(text) and not SOMETHING_RE.match(text) else Broken.VAGUE
    if LISTENER_RE.search(text) or EVALUATION_END_RE.search(text) or REACTION_RE.search(text):
        return Broken.SMALL_TALK
    # A second sentence points at the first (see `tidy`): only the first must stand alone.
    first = SENTENCE_END_RE.split(text, maxsplit=1)[0]
    opening = FIRST_SENTENCE_POINTER_RE.match(first) or (
        OPENING_DEMONSTRATIVE_RE.match(first) and not NAME_RE.search(text)
    )
    them = THEM_OBJECT_RE.match(first) and not SUBJECT_FIRST_RE.match(first)
    if opening or them or _unresolved(TIME_RE.sub("", first)) or _unnamed(first):
        return Broken.SUBJECT
    if SOMETHING_RE.match(text):
        return Broken.VAGUE
    specific = [w for w in _specific(text) if w not in GENERIC]
    # One word may be enough for a dated event ("Went camping last weekend", "Graduated last
    # week"), unless that word is the moment's work or talk ("Submitted a few more last week").
    # A form's event needs one word beside its verb ("Got a new puppy", not "Joined in").
    # A name is enough beside one more word ("Has always wanted to learn Spanish").
    event_word = event and specific and not text.lower().startswith(specific[0])
    enough = 1 if event_word or NAMED_RE.search(text) else MIN_WORDS
    if len(specific) < enough and not (
        specific and DATED_RE.search(text) and specific[0] not in UNDATED_NOT_EVENTS
    ):
        return Broken.VAGUE
    return None


def _specific(text: str) -> list[str]:
    """The words of `text` that say what, who, where or when: codes and figures count."""
    words = [w for w in meaningful_words(text) if w not in EMPTY]
    return words + FIGURE_RE.findall(text)


def _unnamed(text: str) -> bool:
    """Whether `text` has a pointer that only a name or a person before it resolves ("each
    other", "felt it", "these lovely flowers") and none is there."""
    m = UNNAMED_POINTER_RE.search(text)
    if m is None or INTRODUCED_RE.search(text):
        return False
    before = text[: m.start()]
    return not (NAME_RE.search(before) or set(meaningful_words(before)) & PEOPLE)


def _unresolved(text: str) -> bool:
    """Whether `text` has a pointer with nothing in it to point at. A demonstrative with its
    noun names what it shows ("Made this bowl in their class"), a bare one does not ("Painted
    this after ..."); "it" points back at what the fact said before it ("Finished their first
    screenplay and printed it") or at the subject it opens with ("Dancing ... the feeling it
    gives them"); "he", "she", "that name" at a name or a person before them; "them" as a thing
    ("a bunch of them") and "there" point outside."""
    for m in POINTER_RE.finditer(text):
        if INTRODUCED_RE.match(text, m.start()):
            continue
        word = m[0].split()[-1].lower() if m[0].split() else ""
        before = text[: m.start()]
        if word in DEMONSTRATIVES and DEGREE_RE.match(text, m.end()):
            continue  # "this far"
        if word in DEMONSTRATIVES and NOUN_NEXT_RE.match(text, m.end()):
            # "this bowl" names it; "this pic", "that other series" only with a name.
            phrase = text[m.end() :].lower().split()[:4]
            if SHOWN.intersection(w.strip(",.!?") for w in phrase) and not NAME_RE.search(text):
                return True
            continue
        if word in PERSONAL or word in THAT_NOUNS:
            if not (NAME_RE.search(before) or set(meaningful_words(before)) & PEOPLE):
                return True
            continue
        if word in ("it", "its"):
            if not (
                NAME_RE.search(before)
                or SUBJECT_FIRST_RE.match(text)
                or len(_specific(before)) >= 3
            ):
                return True
            continue
        return True
    return False


def keep(text: str, *, shaped: bool = False, event: bool = False) -> str | None:
    """The fact to keep for `text` (tidied), or None when it breaks a rule."""
    tidied = tidy(text)
    return tidied if verdict(tidied, shaped=shaped, event=event) is None else None
