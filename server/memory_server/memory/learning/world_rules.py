"""The rule extractor's vocabulary for the user's world (memory/learning/extract.py says how a
clause is read): their people, work, places, possessions, health and constraints, plans and dated
events. Each form is anchored at the start of a first-person clause, as the preference rules
are, so "my sister likes jazz" or "he moved to Rome" match nothing.

    my <person> is <Name> | a/an X        → <Person> is <Name> | a/an X   ("Manager is Tom Lee")
    my <person>'s name is <Name>          → <Person> is <Name>
    I report to <Name>                    → Reports to <Name>
    I got a job at X / I started (a new job) at X / I'm employed at X → Works at X
    I moved to <Place> / I grew up in X / I was born in X → Moved to X / Grew up in X / ...
    I have|I've got|I own a/an/two/my own X → Has|Owns a X   (not "a question", "a problem"...)
    I'm allergic|intolerant|sensitive to X / I'm vegetarian|diabetic|... → Is allergic to X / ...
    I have asthma|diabetes|... / I suffer from X / I was diagnosed with X / I can't|don't eat X
    I'm|we're going|flying|travelling to <Place> ... → Is going to Rome in May
    I'm|we're getting married|having a baby ... / I'm going to visit|adopt|... X → Is ... (plan)
    I|we ran|went|visited|...ed X + a date ("last Sunday", "in May", "two years ago", "just"; or
      a sentence that opens with it), a life event (graduated, got married, retired, had a baby)
      or a notable one (won, joined, adopted, bought, visited, met, "got a new job|puppy")
      → Ran a marathon last Sunday / Graduated from MIT / Won a regional tournament
      Without a date too, unless the verb is the moment's work or talk (added, installed, saved,
      got, did, tried ...: `UNDATED_NOT_EVENTS`), the object is one word or points at the talk
      (you, a mistake, the advice): "I went to a support group" → Went to a support group
    I'm passionate about|grateful for|really into|drawn to X / I believe in X / I find peace|
      joy|comfort in X → Is passionate about X / Believes in X / Finds peace in X (preference)
    I'm determined|excited|looking forward to X / I'm going to|gonna X (not the next step:
      run, check, ask...) / I want|hope|plan to help|open|visit|adopt|... X → Is going to X (goal)
    A sentence without its "I" ("Been rehearsing hard", "Just finished a marathon") gets it
      back first (`elided_subject`).
    None of these of "you" (the one spoken to: "I'm grateful for your help") or of "something".
    I'm|we're taking|volunteering|training for|writing|... X / I've been <doing> X
      → Is taking a pottery class / Has been playing basketball for a year
    (none of them about the moment's work: "I ran the loader job yesterday", "I have a graph")

Slots (memory.facts.shape): manager (also boss, supervisor, "Reports to"), location ("Lives
in", "Moved to"), employer; a person's name and a person's description ("Sister is a nurse")
are different slots, so the one does not replace the other.
"""

from __future__ import annotations

import re

from memory_server.memory.facts.model import FactKind
from memory_server.memory.facts.shape import PEOPLE, words

_G, _I, _O = FactKind.GOAL, FactKind.IDENTITY, FactKind.OTHER

WorldRule = tuple[re.Pattern[str], str, FactKind, str]


def _rule(pattern: str, template: str, kind: FactKind, mode: str = "strict") -> WorldRule:
    return (re.compile(pattern, re.IGNORECASE), template, kind, mode)


_SOON = r"(?:(?:just|recently|finally|also|actually|now|officially)\s+)?"
_NAME = r"(?P<obj>(?-i:[A-Z]).*)$"  # a capitalised object: a person, a place, a company
_MONTHS = r"january|february|march|april|may|june|july|august|september|october|november|december"
_DAYS = r"monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_PERIODS = rf"week|weekend|month|year|night|summer|winter|spring|fall|autumn|{_DAYS}"
# When a past event happened: what makes "I ran a marathon" worth keeping.
DATED_RE = re.compile(
    rf"\b(?:last (?:{_PERIODS}|{_MONTHS})|yesterday|the other day|"
    rf"(?:a|an|one|two|three|four|five|six|seven|eight|nine|ten|a few|a couple of|several|\d+) "
    rf"(?:days?|weeks?|months?|years?) ago|"
    rf"(?:in|since|back in) (?:{_MONTHS}|(?:19|20)\d\d)|on (?:{_DAYS})|"
    rf"this (?:past )?(?:{_PERIODS}|morning)|earlier this (?:week|month|year)|"
    rf"over the (?:weekend|summer|holidays))\b",
    re.IGNORECASE,
)
# Past forms of events worth a fact; any regular "-ed" verb counts too, except these.
IRREGULAR_PAST = words(
    """ran went got bought took saw met won lost made gave began flew drove swam found left
    became built sold came caught taught spent broke held sang rode did had threw ate drank
    grew paid brought fought climbed wore hit beat"""
)
# Longest first: an alternation tries its words in order.
_IRREGULAR_PAST = "|".join(sorted(IRREGULAR_PAST, key=lambda w: (-len(w), w)))
_NOT_EVENTS = (
    r"used|needed|wanted|tried|changed|asked|mentioned|noticed|wondered|hoped|guessed|assumed|"
    r"decided|settled|opted|committed|switched|moved|migrated|picked|said|told|thought|felt|"
    r"believed|heard|wrote|realized|realised|figured|learned|learnt|forgot|missed|expected|"
    r"meant|supposed|liked|loved|hated|preferred|enjoyed|talked|called|messaged|texted|replied|"
    r"answered|explained|showed|fixed|ran into|checked|got to|had to|seemed|looked|managed to|"
    r"need|feed|bleed|indeed|proceed|succeed|exceed|ended up|made sure"
)
# Past forms that name the moment's work or talk, kept only with a date: "I added a column",
# "I made a mistake", "I saved some" say nothing lasting about the speaker.
UNDATED_NOT_EVENTS = words(
    """added installed updated deployed pushed merged restarted created deleted removed
    configured upgraded downloaded uploaded copied pasted renamed refactored compiled imported
    exported loaded printed ran tested reset cleared clicked typed entered saved edited reran
    rebuilt cloned forked submitted recommended pulled reassured did got ended passed powered
    tackled faced stumbled reached responded chatted received reviewed attached linked posted
    sent emailed replied forwarded scheduled booked cancelled canceled ordered tried pinged"""
)
VAGUE_RE = re.compile(
    r"^(?:something|anything|everything|stuff|things|(?:a )?(?:few|couple|lot|bit)|some|one|more)$",
    re.IGNORECASE,
)
SECOND_PERSON_RE = re.compile(r"\byou(?:r|rs|rself|'re|'ve|'ll)?\b", re.IGNORECASE)
_MOMENT_OBJECT_RE = re.compile(
    r"\b(?:you(?:r|rs|rself|'re|'ve|'ll)?|mistake|typo|error|bug|fix|change|point|note|question|answer|"
    r"reply|message|comment|suggestion|advice|idea|sense|time|way|lot|bit)\b",
    re.IGNORECASE,
)


def undated_event(verb: str, obj: str) -> bool:
    """Whether a past event without its date is still worth a fact: a first-person experience
    or activity ("Went to a support group", "Painted a lake sunrise"), not the moment's work
    or talk ("Added a column", "Made a mistake", "Saw the assistant's post")."""
    verb = verb.lower()
    if verb in UNDATED_NOT_EVENTS or len(obj.split()) < 2:
        return False
    if verb == "had" and re.match(rf"^(?:a|an|the|some)? ?(?:{_NOT_HAD})\b", obj, re.I):
        return False
    return not _MOMENT_OBJECT_RE.search(obj)


_PAST = rf"(?!(?:{_NOT_EVENTS})\b)(?P<v>{_IRREGULAR_PAST}|[a-z]+ed)"
_LIFE_EVENTS = (
    r"graduated|got (?:married|engaged|divorced|promoted|hired|a (?:new )?job|a puppy|a dog|a cat)|"
    r"was (?:born|promoted|hired)|retired|adopted|had a baby|gave birth|ran a marathon|"
    r"started (?:a|my) (?:new )?(?:job|business|company)|bought (?:a|my first) (?:house|home|car)"
)
# Events worth a fact even without their date ("I won a regional tournament").
_NOTABLE = (
    r"won|adopted|joined|signed up for|volunteered (?:at|for|with)|launched|published|opened|"
    r"completed|finished|visited|met|bought|sold|organi[sz]ed|hosted|founded|started|"
    r"got (?:noticed|accepted|selected|invited|nominated|featured|published|drafted|recogni[sz]ed|"
    r"awarded|certified|elected)"
)
_GOT_THINGS = (
    r"got (?:a|an|my|our) (?:new |first |big )?(?:\w+ )?(?:job|promotion|endorsement|award|"
    r"scholarship|degree|diploma|puppy|dog|cat|kitten|car|house|apartment|tattoo|deal|contract|"
    r"offer|internship|certificate|license|licence|medal|trophy|prize|role|part)"
)
# Work on a computer is the moment's business, not a life event ("I ran the loader job").
TECHNICAL_RE = re.compile(
    r"\b(?:the|this|that|my|our|a|an) (?:\w+ )?(?:query|queries|script|command|code|loader|"
    r"pipeline|tests?|build|error|function|server|database|migration|notebook|program|commit|"
    r"branch|ticket|report|dashboard|job run|cell|file|issue|pr|pull request|call|meeting|tab|"
    r"window|page|link|session|chat|conversation|account|graph|index|schema|table|cluster|"
    r"timeout|exception|warning|response|result|answer|message|reply|version|update|"
    r"upgrade|package|library|app|tool|docs?|documentation|tutorial|course|video|article)\b",
    re.IGNORECASE,
)
_CONDITIONS = (
    r"asthma|diabetes|celiac disease|coeliac disease|adhd|autism|arthritis|epilepsy|migraines|"
    r"anxiety|depression|insomnia|eczema|hypertension|high blood pressure|a peanut allergy|"
    r"a nut allergy|(?:a|an) \w+ allergy|type [12] diabetes|lupus|crohn's|ibs|dyslexia|tinnitus"
)
_STATES = (
    r"vegetarian|vegan|pescatarian|diabetic|lactose intolerant|gluten intolerant|celiac|"
    r"coeliac|pregnant|colou?r ?blind|deaf|hard of hearing|sober|teetotal|left-handed|"
    r"right-handed|retired|married|single|divorced|engaged|widowed|self-employed|unemployed|"
    r"an only child|a twin"
)
# "I have a question" is about the moment; only lasting things one has become facts.
_NOT_HAD = (
    r"question|problem|issue|error|bug|idea|doubt|feeling|suggestion|request|query|favou?r|lot|"
    r"bit|few|couple|look|chance|moment|minute|second|meeting|call|deadline|good|great|hard|"
    r"tough|rough|busy|blast|point|theory|thought|quick|follow-up|similar|different|concern|"
    r"confession|way|sense|clue|plan|lot|talk|chat|word|go|try|break|day|week|time|story|"
    r"\w+ story|question for"
)
_COUNT = r"(?:a|an|one|two|three|four|five|six|seven|eight|nine|ten|\d+|my own|some)"
_PLACES_VERBS = r"going|flying|travell?ing|heading|driving"  # "moving to" is a decision
_PLAN_VERBS = (
    r"visit|travel to|move to|fly to|attend|adopt|buy|retire|volunteer at|volunteer|compete in|"
    r"run a|run the \w+ marathon|participate in|spend|open|start|take up|apply (?:to|for)"
)
_ME = r"^(?:I|we) " + _SOON
# "just", "recently", "finally" date an event as well as "last Sunday" does.
_ME_EVENT = (
    r"^(?:I|we)(?:'ve| have)? (?:also |actually )?(?P<soon>(?:just|recently|finally|lately) )?"
)
_ME_EVENT += r"(?:also )?"
_DOING = (
    r"taking|volunteering(?: at)?|training(?: for)?|writing|reading|saving(?: up)? for|"
    r"organi[sz]ing|teaching|coaching|running for|starting|dating|renovating|attending|raising|"
    r"fostering|practicing|practising|painting|playing|making|collecting|mentoring|researching|"
    r"taking care of|looking after|doing|planning(?! to\b)|putting together|hosting|throwing"
)
_NOT_DOING = (
    r"thinking|wondering|meaning|waiting|hoping|wanting|feeling|getting|having|struggling|trying|"
    r"looking|debugging|running|testing|using|going|talking|chatting|asking|reading up|working|"
    r"keeping"
)
# "I'm doing well" is how they are today, not what they do.
_NOT_HOW = r"(?!(?:ok|okay|well|great|good|fine|alright|better|awesome|amazing|pretty|really|so|"
_NOT_HOW += r"very|much|a lot|lots|nothing|fine)\b)"

_P = FactKind.PREFERENCE
_VERY = r"(?:(?:so|really|very|truly|super|also|totally|deeply|incredibly|extremely|always|"
_VERY += r"still|big|now)\s+)*"
# What a plan or wish may be about (beside extract_rules' build/learn/become...): a life plan,
# not the moment's work ("I want to find all accounts ..." is a request).
_WISH_VERBS = (
    r"help|open|visit|travel|adopt|publish|explore|teach|volunteer|mentor|inspire|give back|"
    r"make a difference|raise|pursue|follow|go back to|return to|get into|take up|try out|"
    r"keep|continue|spread|share my|run a|join|compete|become|write (?:a|my) (?:book|novel|"
    r"memoir|screenplay|script|song|album)|record|finish|grow|expand|save (?:up )?for|own|"
    r"move|retire|go to|see the world|have (?:a|kids|children)|get (?:a|my|married)"
)
# Going to do what (after "I'm going to"): not the moment's next step ("run the query again").
_NOT_NEXT = (
    r"run|rerun|ask|try|check|test|look|say|tell|show|send|paste|share|give|need|have to|be|go|"
    r"do|use|write|read|explain|describe|reply|answer|restart|open|close|get|make sure|call|"
    r"take a look|see|think|stop|leave|let|post|email|text|ping|upload|download|install|add|"
    r"change|fix|update|delete|remove|copy|type|sleep|grab|head"
)

# "I believe in us" is encouragement, not a belief about the world.
_NOT_PRONOUN = r"(?!(?:us|me|him|her|them|myself|ourselves|each other|one another)\b)"

# Rules tried before the preference and decision forms (extract_rules.RULES).
WORLD_FIRST: list[WorldRule] = [
    # what the speaker cares about, is drawn to, is grateful for ("I'm passionate about dance")
    _rule(rf"^I'm {_VERY}(?P<a>passionate about|grateful for|thankful for|drawn to|into|"
          r"obsessed with|in love with|dedicated to|committed to helping|devoted to) "
          + _NOT_PRONOUN + r"(?P<obj>.+)$", "Is {a} {obj}", _P, "strict self"),
    _rule(rf"^I've {_VERY}been {_VERY}(?P<a>into|obsessed with|passionate about) (?P<obj>.+)$",
          "Has been {a} {obj}", _P, "strict self"),
    _rule(r"^we (?:really |truly |also |just |both |all )*(?P<v>love|enjoy) " + _NOT_PRONOUN
          + r"(?P<obj>.+)$", "{v}s {obj}", _P, "strict self"),
    _rule(r"^I(?: have|'ve| also)? (?:always |also |really )*(?:had|have|got) a (?:real |deep |"
          r"huge |big |special )?(?P<a>love|passion|soft spot) for (?P<obj>.+)$",
          "Has a {a} for {obj}", _P, "strict self"),
    _rule(r"^I (?:really |truly |firmly |strongly |also )*believe in " + _NOT_PRONOUN
          + r"(?P<obj>.+)$", "Believes in {obj}", _P, "strict self"),
    _rule(r"^I (?:really |always |also )*find (?P<a>comfort|peace|joy|strength|solace|"
          r"inspiration|happiness|purpose|meaning) in (?P<obj>.+)$", "Finds {a} in {obj}", _P,
          "strict self"),
    _rule(rf"^I'm {_VERY}(?P<a>determined|excited|eager|motivated|looking forward) to "
          r"(?P<obj>\S+ \S+.*)$", "Is {a} to {obj}", _G, "nontech strict self two"),
    _rule(rf"^(?:I'm|we're) (?:also |still |really )?going to (?!(?:{_NOT_NEXT})\b)"
          r"(?P<obj>[a-z]+ \S+.*)$", "Is going to {obj}", _G, "nontech strict self two"),
    _rule(rf"^I (?:really |also |still )*(?P<v>want|hope|plan|intend|aim|dream) to "
          rf"(?P<a>{_WISH_VERBS})\b(?P<obj>.*)$", "{v}s to {a} {obj}", _G,
          "nontech strict self bare"),
    _rule(r"^I (?:now )?(?:directly )?report(?: directly)? to " + _NAME, "Reports to {obj}", _I,
          "name"),
    _rule(r"^I " + _SOON + r"moved to " + _NAME, "Moved to {obj}", _I),
    _rule(r"^I " + _SOON + r"(?:got|landed|accepted|started) (?:a |my )?(?:new )?job "
          r"(?P<a>at|with) " + _NAME, "Works {a} {obj}", _I, "undated"),
    _rule(r"^I'm (?:now )?(?:employed|hired) (?P<a>at|by) " + _NAME, "Works for {obj}", _I),
    _rule(r"^I (?P<v>grew up|was born|was raised) in (?P<obj>.+)$", "{v} in {obj}", _I),
    _rule(r"^I'm (?:originally )?from (?P<obj>.+)$", "Is from {obj}", _I),
    _rule(r"^I'm (?:severely |very |mildly |a bit )?(?P<a>allergic|intolerant|sensitive) to "
          r"(?P<obj>.+)$", "Is {a} to {obj}", _I),
    _rule(rf"^I'm (?:now |also )?(?P<obj>(?:{_STATES}))$", "Is {obj}", _I),
    _rule(rf"^I (?:have|'ve got|'ve had) (?P<obj>(?:{_CONDITIONS})\b.*)$", "Has {obj}", _I),
    _rule(r"^I suffer from (?P<obj>.+)$", "Suffers from {obj}", _I),
    _rule(r"^I was diagnosed with (?P<obj>.+)$", "Was diagnosed with {obj}", _I),
    _rule(r"^I can't (?P<v>eat|drink|have) (?P<obj>.+)$", "Can't {v} {obj}", _I),
    _rule(r"^I (?:don't|never) (?P<v>eat|drink) (?P<obj>.+)$", "Doesn't {v} {obj}", _I),
    _rule(rf"^I(?: also)?(?: have|'ve got) (?P<obj>{_COUNT} (?!(?:{_NOT_HAD})\b).+)$", "Has {obj}",
          _I, "nontech"),
    _rule(rf"^I (?:also )?own (?P<obj>{_COUNT} .+)$", "Owns {obj}", _I, "nontech"),
    _rule(rf"^(?:I'm|we're) {_SOON}(?P<a>{_PLACES_VERBS}) to " + _NAME, "Is {a} to {obj}", _G),
    _rule(r"^(?:I'm|we're) (?P<a>getting married|getting engaged|having a baby|expecting a baby|"
          r"expecting|graduating|retiring|training for|saving (?:up )?for)\b(?P<obj>.*)$",
          "Is {a} {obj}", _G, "loose bare"),
    _rule(rf"^(?:I'm|we're) (?P<a>going to|planning to|about to) (?P<b>{_PLAN_VERBS}) (?P<obj>.+)$",
          "Is {a} {b} {obj}", _G),
    _rule(rf"^I (?P<v>plan|intend|hope|aim) to (?P<a>{_PLAN_VERBS}) (?P<obj>.+)$",
          "{v}s to {a} {obj}", _G),
    _rule(_ME + rf"(?P<v>{_LIFE_EVENTS})\b(?P<obj>.*)$", "{v} {obj}", _O, "loose bare"),
    _rule(_ME_EVENT + _PAST + r" (?P<obj>.+)$", "{v} {obj}", _O, "dated self"),
    _rule(_ME_EVENT + rf"(?P<v>{_GOT_THINGS})\b(?P<obj>.*)$", "{v} {obj}", _O, "nontech bare"),
    _rule(_ME_EVENT + rf"(?P<v>{_NOTABLE}) (?P<obj>.+)$", "{v} {obj}", _O, "nontech self"),
    _rule(rf"^(?:I'm|we're) {_SOON}(?P<a>{_DOING}) {_NOT_HOW}(?P<obj>.+)$", "Is {a} {obj}", _O,
          "nontech self"),
    _rule(rf"^(?:I've|we've) (?:been|started) (?!(?:{_NOT_DOING})\b)(?P<v>[a-z]+ing) {_NOT_HOW}"
          r"(?P<obj>.+)$", "Has been {v} {obj}", _O, "nontech"),
]  # fmt: skip
# Retractions of the user's world: what each one takes back, in the form of the fact.
WORLD_RETRACTIONS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^I (?:quit|left) my job (?:at|with) (?P<r>.+)$", re.IGNORECASE), "I work at {r}"),
    (re.compile(r"^I moved (?:away )?(?:out of|away from) (?P<r>.+)$", re.IGNORECASE),
     "I live in {r}"),
]  # fmt: skip
_FRONT_DATE_RE = re.compile(
    rf"^(?P<when>{DATED_RE.pattern})\s*,?\s+(?P<rest>(?:I|we)\b.*)$", re.IGNORECASE
)


_ELIDED_RE = re.compile(
    r"^(?:(?P<been>been (?!(?:thinking|wondering|meaning|waiting|hoping|busy|there|good|well|"
    r"ok|okay|fine|great|a while)\b))|(?:just |recently |finally |also )*(?=(?:went|finished|"
    r"started|visited|joined|signed up|adopted|won|bought|got (?:a|an|my) (?:new )?\w+|ran|"
    r"took up|tried out|moved|graduated|celebrated|volunteered)\b))",
    re.IGNORECASE,
)


def elided_subject(sentence: str) -> str:
    """A sentence whose "I" is left out ("Been rehearsing hard", "Just finished a marathon")
    with it put back, so the first-person forms read it; other sentences as they are."""
    if m := _ELIDED_RE.match(sentence):
        return ("I've " if m["been"] else "I ") + sentence[:1].lower() + sentence[1:]
    return sentence


def front_date(sentence: str) -> tuple[str, str]:
    """A sentence that opens with its date ("Last week, I joined a gym") as (the rest, the
    date), so the date can end the first clause as it does in "I joined a gym last week"."""
    if m := _FRONT_DATE_RE.match(sentence):
        return m["rest"], m["when"][:1].lower() + m["when"][1:]
    return sentence, ""


_PERSON_NAME_RE = re.compile(r"^(?-i:[A-Z])[\w.'-]*(?: (?-i:[A-Z])[\w.'-]*){0,3}$")
_DESCRIPTION_RE = re.compile(r"^(?:a|an) (?!(?:big |huge )?fan\b)[\w' -]+$", re.IGNORECASE)
_PERSON_MODIFIERS = words(
    """best older younger little big baby new old twin step line direct family personal current"""
)


def person_fact(attr: str, be: str, value: str) -> str | None:
    """ "my <person> is <value>" as a fact ("Manager is Tom Lee"), or None when <attr> is not
    one of the user's people or <value> is neither a name nor a description ("a nurse")."""
    words = attr.lower().removesuffix("'s name").split()
    if not 1 <= len(words) <= 3 or not all(w in _PERSON_MODIFIERS for w in words[:-1]):
        return None
    if words[-1] not in PEOPLE or be.lower() != "is":
        return None
    name = _PERSON_NAME_RE.match(value) and len(value) > 1 and value != "I"
    if not name and not (_DESCRIPTION_RE.match(value) and len(value.split()) <= 8):
        return None
    return " ".join(words) + " is " + value
