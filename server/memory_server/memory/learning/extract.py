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
company, location, language, pronouns, goal, project, stack, hobbies, dream, ... or
favourite/preferred/default anything) and for the user's people ("my manager/sister/dentist is
<Name> | a/an X"): "my query is slow" and "my boss is annoying" are not facts about the user.

The user's world (people, work, places, possessions, health and constraints, plans, dated
events: "I report to Ann", "I moved to Lisbon", "I have a dog named Max", "I'm allergic to
peanuts", "we're going to Rome in May", "I ran a marathon last Sunday") is read by the forms in
memory/learning/world_rules.py, tried before the ones above, with what the speaker cares about ("I'm
passionate about X", "I believe in X") and their plans ("I'm gonna keep training"). A past
event is kept with or without its date ("I went to a support group") unless it names the
moment's work or talk ("I added a new column", "I made a mistake", "I saw your post"; those
need a date, and one about the moment's work, "I ran the loader job yesterday", never counts).

A sentence none of these forms reads (and no retraction) may still tell something of the
user's own life in a plain statement ("Pottery is a huge part of my life"): memory/
self_statements.py says when it is kept, close to the user's words (kind OTHER, no slot), and
`RuleExtractor(self_statements=False)` (setting `ltm_self_statements`) turns that off.

Every fact is then held to the quality rules of memory/learning/quality.py (bench/fact_quality/
RULES.md): cut to one claim, and dropped when it points at nothing it names, is small talk or a
feeling of the moment, says nothing specific, is garbled, or restates a live fact in other words
(`Recalled.restates`). A sentence that opens with a pointer is not read with the one before when a
rule form read that one (the pair would say the form's fact again). `precise=False` skips both.

Retractions ("forget that I like jazz", "I don't like jazz anymore", "I no longer work at Acme",
"I'm not a student anymore", "forget my timezone", "ignore what I said about coffee", "that's not
true anymore" after a statement or after "you said I ...") give `retraction=True` and the text of
what is retracted in the same form ("Likes jazz", "Timezone", "Coffee").

Skipped: questions (a sentence ending in "?" or opening with an interrogative; "could you
forget that I ..." and "can you remember that I ..." still count), hedges and hypotheticals
(if, maybe, would, I think, used to), requests to repeat or reveal a secret ("please repeat
my key back to me", "what's my password again?"), one-off scope (for now, today, for this
query), other people's reported words (said, told, thinks, according to, unless the speaker is
the user), and anything recall put in the context: a sentence or fact equal to a recalled text,
or whose content words are >= 80 % in one (retractions are kept: they are about recalled facts).

`change` is set when the sentence says so (actually, now, instead, anymore, no longer, changed
my mind, switch to, these days); "from now on" sets it only when a recalled fact is about the
same slot (see reconcile), since on its own it also starts brand-new instructions.
"""

from __future__ import annotations

import asyncio
import re

from memory_server.memory.facts.model import Candidate, FactKind
from memory_server.memory.facts.restated import Recalled, unique
from memory_server.memory.learning import quality
from memory_server.memory.learning.extract_rules import (
    CHANGE_RE,
    CLAUSE_RE,
    DEICTIC_RE,
    DEICTIC_START_RE,
    EPHEMERAL_RE,
    HEDGE_RE,
    IMPERATIVE_RE,
    LASTING_RE,
    MY_RE,
    POINTING_RE,
    POLITE_RE,
    QUESTION_RE,
    REFERENCE_RE,
    REPORTED_RE,
    RETRACT_RULES,
    RULES,
    SECRET_REQUEST_RE,
    SELF_REPORT_RE,
    SENTENCE_RE,
    SPEAKER_RE,
    TAIL_RE,
    YOU_SAID_RE,
    attribute_kind,
    bad_value,
    canon,
    clean,
    sentence_case,
    strip_fillers,
    swap_person,
)
from memory_server.memory.learning.self_statements import POINTER_RE, self_statements
from memory_server.memory.learning.words import third_singular
from memory_server.memory.learning.world_rules import (
    DATED_RE,
    SECOND_PERSON_RE,
    TECHNICAL_RE,
    VAGUE_RE,
    elided_subject,
    front_date,
    person_fact,
    undated_event,
)
from memory_server.memory.ports import ExtractionInput

NAME = "rules-v1"
_INLINE_CHARS = 4096


class RuleExtractor:
    """Extractor that needs no model: rules over the user's sentences (see module doc).
    `self_statements` off keeps only the rule forms (memory/learning/self_statements.py).
    `precise` off skips the quality rules (memory/learning/quality.py) and the restatement
    checks beyond `Recalled.repeats`, for a comparison."""

    def __init__(self, *, self_statements: bool = True, precise: bool = True) -> None:
        self._self_statements = self_statements
        self._precise = precise

    @property
    def name(self) -> str:
        return NAME

    async def extract(self, turn: ExtractionInput) -> list[Candidate]:
        # The rules are a Python pass over every sentence: a long turn's runs on a worker thread.
        if len(turn.user_text) <= _INLINE_CHARS:
            return self.extract_sync(turn)
        return await asyncio.to_thread(self.extract_sync, turn)

    def extract_sync(self, turn: ExtractionInput) -> list[Candidate]:
        recalled = Recalled(turn.recalled)
        out: list[Candidate] = []
        previous: tuple[str, list[Candidate]] | None = None  # what "that's not true" is about
        before = ""  # the sentence before, for one that opens with a pointer ("It helps me")
        told: list[Candidate] = []  # the self statements that sentence gave
        formed = False  # whether a rule form read that sentence
        for raw in SENTENCE_RE.split(turn.user_text):
            sentence = canon(raw.strip())
            if not sentence or SECRET_REQUEST_RE.search(sentence):
                continue  # a request to repeat or reveal a secret teaches nothing
            said, read = sentence, False  # read: a form (or a retraction) read a clause of it
            formed_before, formed = formed, False
            change = bool(CHANGE_RE.search(sentence))
            lasting = bool(LASTING_RE.search(sentence))
            question = sentence.rstrip("\"') ").endswith("?")
            # A hedge, a one-off scope or someone else's words anywhere in the sentence colour
            # all of it: "For this query, I prefer tables" is not a lasting preference.
            unsure = bool(
                HEDGE_RE.search(POLITE_RE.sub("", strip_fillers(sentence)))
                or EPHEMERAL_RE.search(sentence)
            )
            reported = bool(REPORTED_RE.search(SELF_REPORT_RE.sub("", sentence)))
            sentence, when = front_date(elided_subject(strip_fillers(sentence)))
            speaker = True  # whether the clause before is the user's (or an instruction)
            for i, part in enumerate(CLAUSE_RE.split(sentence.rstrip("?!. "))):
                clause = strip_fillers(part if i or not when else f"{part} {when}")
                polite = bool(POLITE_RE.match(clause))
                clause = POLITE_RE.sub("", clause)
                if not clause:
                    continue
                if not speaker and IMPERATIVE_RE.match(clause):
                    continue  # "they ... and always make us smile" is no instruction
                speaker = bool(SPEAKER_RE.match(clause))
                found: list[Candidate] = []
                if REFERENCE_RE.match(clause):
                    read = True
                    if previous is not None and not question:
                        out = [c for c in out if c not in previous[1]]
                        found = _retracted(_statement(previous[0], lasting=False), change)
                elif (gone := _retraction(clause)) is not None:
                    read = True
                    if not unsure and (polite or not question):
                        found = _retracted(gone, change)
                elif not (unsure or reported or QUESTION_RE.match(clause)) and (
                    polite or not question
                ):
                    found = [
                        Candidate(text, kind, change=change or recalled.same_slot(text, lasting))
                        for said_so, kind in _statement(clause, lasting=lasting)
                        if not recalled.repeats(sentence)
                        and (text := self._kept(said_so, recalled, form=kind)) is not None
                    ]
                    formed = formed or bool(found)
                out.extend(found)
                previous = (clause, found)
                read = read or bool(found)
            # A sentence no form read may still tell something of the user's life; one that
            # opens with a pointer is read with the sentence before (and replaces its fact).
            texts = (
                self_statements(said, before)
                if self._self_statements and not (read or question)
                else []
            )
            texts = [
                kept
                for t in texts
                if not recalled.repeats(said) and (kept := self._kept(t, recalled)) is not None
            ]
            if texts and POINTER_RE.match(strip_fillers(said)):
                if told:
                    out = [c for c in out if c not in told]
                elif formed_before and self._precise:
                    texts = []  # the fact the form read is the one this would say again
            told = [Candidate(text, FactKind.OTHER, self_statement=True) for text in texts]
            out.extend(told)
            before = "" if question else said
        return unique(out)

    def _kept(self, text: str, recalled: Recalled, *, form: FactKind | None = None) -> str | None:
        """The fact to keep for `text`, or None: what recall showed already and, when precise,
        a restatement of it or a fact that breaks a quality rule (memory/learning/quality.py).
        `form`: the kind of the rule form that read it; such a fact is judged by fewer rules
        (an event, OTHER, by all but one specific word is enough: "Got a new puppy")."""
        if not self._precise:
            return None if recalled.repeats(text) else text
        shaped = form is not None and form is not FactKind.OTHER
        kept = quality.keep(text, shaped=shaped, event=form is FactKind.OTHER)
        return None if kept is None or recalled.restates(kept) else kept


def _statement(clause: str, *, lasting: bool) -> list[tuple[str, FactKind]]:
    """The fact a first-person clause states, as (text, kind); [] when it states none."""
    clause = YOU_SAID_RE.sub("", strip_fillers(clause))
    if HEDGE_RE.search(clause) or EPHEMERAL_RE.search(clause) or "?" in clause:
        return []
    for pattern, template, kind, mode in RULES:
        if ("lasting" in mode and not lasting) or not (m := pattern.match(clause)):
            continue
        obj = clean(TAIL_RE.sub("", m["obj"]))
        if "undated" in mode:  # "Works at Stripe", not "Works at Stripe last month"
            obj = clean(DATED_RE.sub("", obj))
        elif "dated" in mode and not (
            m["soon"] or DATED_RE.search(obj) or undated_event(m["v"], obj)
        ):
            continue  # "I added a column" needs its date to be an event; "I went to Rome" not
        if ("dated" in mode or "nontech" in mode) and TECHNICAL_RE.search(obj):
            return []
        if "self" in mode and (SECOND_PERSON_RE.search(obj) or VAGUE_RE.match(obj)):
            return []  # "I'm grateful for your help" is about the other one, and the moment
        if "two" in mode and len(obj.split()) < 2:
            return []  # "I'm excited to go" says nothing of where
        if (
            (not obj and "bare" not in mode)
            or len(obj.split()) > (4 if mode == "name" else 16)
            or (mode == "name" and not obj[0].isupper())
            or DEICTIC_START_RE.match(obj)
            # "this month" is a date, not a pointer: "Lost their job at Door Dash this month"
            or (POINTING_RE.search(obj) and POINTING_RE.search(DATED_RE.sub("", obj).strip()))
            or ("strict" in mode and DEICTIC_RE.search(DATED_RE.sub("", obj)))
        ):
            return []
        parts = {k: v.lower() for k, v in m.groupdict("").items()}
        text = template.format(**(parts | {"obj": swap_person(obj)}))
        return [(sentence_case(text), kind)]
    if m := MY_RE.match(clause):
        attr, value = m["attr"].strip(), clean(TAIL_RE.sub("", m["obj"]))
        if value and (person := person_fact(attr, m["be"], value)) is not None:
            return [(sentence_case(swap_person(person)), FactKind.IDENTITY)]
        known = attribute_kind(attr)
        if known is not None and value and len(value.split()) <= 8 and not bad_value(attr, value):
            text = f"{attr} {m['be'].lower()} {swap_person(value)}"
            return [(sentence_case(text), known)]
    return []


def _retraction(clause: str) -> list[tuple[str, FactKind]] | None:
    """What a retraction clause retracts (possibly nothing usable); None if it is not one."""
    for pattern, how in RETRACT_RULES:
        if not (m := pattern.match(clause)):
            continue
        groups = m.groupdict("")
        if how == "t":  # a topic: "ignore what I said about coffee" → "Coffee"
            topic = clean(re.sub(r"^my\s+", "", groups["t"], flags=re.IGNORECASE))
            return [(sentence_case(swap_person(topic)), FactKind.OTHER)] if topic else []
        if how == "m":  # an attribute: "forget my timezone" → "Timezone"
            attr = clean(groups["m"])
            kind = attribute_kind(attr)
            return [(sentence_case(attr), kind)] if kind is not None else []
        statement = strip_fillers(how.format(**groups))
        return _statement(statement, lasting=False) or _fallback(statement)
    return None


def _fallback(statement: str) -> list[tuple[str, FactKind]]:
    """A plainer rewrite, for retractions only: a retraction deletes only a fact that matches
    it closely, so a rough form is safe where a rough new fact would not be."""
    if HEDGE_RE.search(statement) or DEICTIC_RE.search(statement):
        return []
    if m := re.match(r"^I'm (?P<r>.+)$", statement, re.IGNORECASE):
        return [("Is " + swap_person(clean(m["r"])), FactKind.OTHER)]
    m = re.match(r"^I (?P<v>[a-z]+) (?P<r>.+)$", statement, re.IGNORECASE)
    if m and m["v"].lower() not in {"can't", "will", "was", "did", "do", "have", "had", "said"}:
        verb, rest = third_singular(m["v"].lower()), swap_person(clean(m["r"]))
        return [(sentence_case(f"{verb} {rest}"), FactKind.OTHER)]
    if m := re.match(r"^my (?P<t>.+?) (?P<be>is|are) (?P<r>.+)$", statement, re.IGNORECASE):
        return [(sentence_case(f"{m['t']} {m['be']} {swap_person(clean(m['r']))}"), FactKind.OTHER)]
    return []


def _retracted(found: list[tuple[str, FactKind]], change: bool) -> list[Candidate]:
    return [Candidate(text, kind, retraction=True, change=change) for text, kind in found]
