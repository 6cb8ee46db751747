"""The quality rules' vocabulary (memory/learning/quality.py says what it does with it): what
marks a comment after a fact (R2), a pointer with nothing to point at (R1), small talk, a reaction
or a feeling of the moment (R3), the words that say nothing specific (R4) and the marks of a
rewrite gone wrong (R5).
"""

from __future__ import annotations

import re

from memory_server.memory.facts.shape import words


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


# --- R2: one thing --------------------------------------------------------------------------
# A second sentence is a comment on the first ("It was amazing", "Here's a picture"), or a new
# claim that deserves its own fact; either way the first is the fact.
# Not after a title or an abbreviation: "Dentist is Dr. Patel", "Is a nurse at St. Mary's".
_NOT_AN_END = "".join(
    rf"(?<!\b{t})"
    for t in ("Dr", "Mr", "Ms", "Mrs", "St", "Jr", "Sr", "Prof", "vs", "etc", "e.g", "i.e")
)
SENTENCE_END_RE = re.compile(rf"(?<=[a-z0-9\"')]){_NOT_AN_END}[.!?]+\s+(?=[\"'A-Za-z])")
_COMMENT = (
    r"(?:it|that|this|which)(?:'s|\s+(?:is|was|has been|looks|looked|feels|felt|sounds|seems))|"
    r"(?:(?:so|such)(?! they\b| their\b| the\b| now\b)|and it's|love it|take a look|"
    r"check (?:it|this|that) out|here's|sounds like|what a|how)\b"
)
TAIL_RE = _rx(
    rf"(?:\s*(?:,|[-–—]+)\s*(?:but\s+|and\s+)?(?:{_COMMENT})|\s+and\s+(?:it|that)(?:'s|\s+(?:is|was|"
    rf"has been|feels|makes|keeps|gives)))\b.*$|\s*(?:,|[-–—]+)\s*(?:it|that|this)\s+\w+s\b.*$"
)
# "..., and the people are awesome": a comment on something beside the fact.
EVALUATION_TAIL_RE = _rx(
    r",?\s+and (?:the|their) \w+(?: \w+)? (?:is|are|was|were) (?:so |really |just |super )?"
    r"(?:awesome|amazing|great|incredible|wonderful|fantastic|the best|lovely|nice)$"
)
MORE_RE = _rx(r"^(?:it|it's|they|they're|this|that|that's|these|those)\b(?! (?:was|were|is|'s)$)")
# How something felt: "It was so rewarding", "It's kinda freeing", "It made them so happy".
FEELING_RE = _rx(
    r"\b(?:was|were|is|'s|been|felt|feels|made them(?: feel)?)\s+(?:(?:so|really|very|super|"
    r"truly|pretty|kinda|such|a|an|just|quite|totally)\s+)*(?:awesome|amazing|great|"
    r"incredible|wonderful|fantastic|fun|cool|rewarding|freeing|inspiring|special|"
    r"nerve-wracking|exciting|tough|hard|rough|stressful|happy|proud|calm|peaceful|blast|"
    r"experience|journey|ride|relief|gorgeous|beautiful|stunning|lovely|nice|good|"
    r"heartwarming|powerful)\b|\bthe best\b|\bmemor(?:y|ies)\b"
)
OPENER_RE = _rx(
    r"^(?:on (?:a|another) (?:different )?note|anyway|by the way|also),?\s+(?:they\s+)?"
)

# --- R1: a pointer with nothing to point at -------------------------------------------------
# "it", "this", "these", "those", "he", "she", ... and "them" as a thing ("a bunch of them"):
# in a fact written in third person "they"/"them" is the user, so only those uses count.
POINTER_RE = _rx(
    r"\bthat\b(?=\s+(?:\w+\s+){0,3}?(?:pic|picture|photo|movie|book|series|show|song|game|city|"
    r"place|intensity|feeling|one)\b)|"
    r"\b(?:it|its|this|these|those|he|she|him|his|her|hers)\b(?!\s*(?:'s|is|was|has)?\s*"
    r"(?:been\s+)?(?:hard|tough|rough|great|amazing|awesome|cool|fun|nice|rewarding|important|"
    r"easy|good|worth))|\b(?:of|all|both|some|few|more|making|watched|read|named|painted) them\b|"
    r"(?<!\ball )\b(?:like|about|of|with|for|from|to|by) (?:that|this|these|those)"
    r"(?=\s*(?:$|[,.!?]| too\b| as well\b))|"
    r"\bthat (?:one|pic|picture|photo|place|feeling|moment|name|way)\b|"
    r"\b(?:there|here|in|at) (?:it|there)\b|\b(?:people|folks|everyone|them) there\b|"
    r"\b(?<!over )there\b(?!'s| is| are| was| were)|\bhere\b(?!'s)|^(?:one|another)\b|"
    r"\b(?:another|one)\b(?=\s+(?:at|in|on|from|of|with|for|to|while)\b)|\banother one\b"
)
# "them" as what the user did something to ("Chose them 'cause ...", "Sees them at least once a
# week", "Loves watching them play"): in the first clause of a fact that opens with the user's
# verb, before any other subject, "them" is not the user.
THEM_OBJECT_RE = _rx(
    r"^(?:(?!(?:how|when|that|which|who|what|they|it|he|she|and|but|because|'cause|so|while|if|"
    r"makes?|made|helps?|helped|lets?|gives?|gave|keeps?|kept|reminds?|brings?)\b)[\w'-]+ )+"
    r"them\b"
)
# Pointers a name or a person before them resolves: "Pushes each other" (who?), "they felt it".
UNNAMED_POINTER_RE = _rx(
    r"\beach other\b|\b(?:felt|feel|feels) it\b|\b(?:these|those) (?:\w+ )?\w+s\b"
)
# A demonstrative that introduces what it names ("this awesome fantasy RPG called ...").
INTRODUCED_RE = _rx(r"(?:this|these)\b[^,.]*\b(?:called|named|by|from)\b")
TIME_RE = _rx(
    r"\b(?:this|that|these|those) (?:past )?(?:day|week|weekend|month|year|summer|winter|spring|"
    r"fall|autumn|morning|evening|afternoon|time|season)s?\b"
)
IT_WHEN_RE = _rx(r"\bit (?=when|if|that)\b")
DEGREE_RE = _rx(r"\s+(?:far|much|long|many|often|good|bad|big)\b")
PERSONAL = words("he she him his her hers")
THAT_NOUNS = words("one pic picture photo place feeling moment name way")
NAME_RE = re.compile(r"(?<=\S)\s+(?:[A-Z][\w'-]+)")  # a capitalised word after the first
# A capitalised word inside a sentence: a name ("learn Spanish"), not a sentence's first word.
NAMED_RE = re.compile(r"(?<=[\w,'])\s+(?!I\b)(?:[A-Z][\w'-]+)")
# The fact opens with its subject, not a verb: "Dancing lets them ...", "Their store ...",
# "Art's allowed them ...", "Basketball has been ...".
SUBJECT_FIRST_RE = _rx(
    r"^(?:their\b|\w+'s\b|(?!\w+ed\b)\w+"
    r"(?: (?!(?:it|they|them|this|that|but|and|because)\b)\w+){0,4}? "
    r"(?:is|was|has|have|had|are|were|gives|gave|makes|made|helps|helped|keeps|brings|lets|"
    r"means|changed)\b)"
)
FIRST_SENTENCE_POINTER_RE = _rx(
    r"^(?:it|it's|its|here|there|he|she|his|her|him)\b|"
    r"^(?:reminds|helps|makes|gives|keeps|lets|shows) them\b|"
    r"^(?:this|that|these|those)\b(?!\s+[a-z-]{3,}"
    r"(?<!\bwas)(?<!\bis)(?<!\bare)(?<!\bhas)(?<!\bhad)(?<!\bwere)\b)"
)
# "That love and enthusiasm keeps them ...": what the talk was about, unless a name says it.
OPENING_DEMONSTRATIVE_RE = _rx(r"^(?:this|that|these|those)\b")
DEMONSTRATIVES = words("this that these those")
# What a demonstrative shows rather than names: a picture, a place, "those little guys".
SHOWN = words(
    """pic pics picture pictures photo photos shot city place places spot town one ones stuff
    thing things guys little book books series movie movies film song songs game games show
    story stories novel intensity feeling way"""
)
# A noun (or its adjective) after a demonstrative: not a function word, a verb of being or
# the end of the clause.
NOUN_NEXT_RE = _rx(
    r"\s+(?!(?:is|was|are|were|has|had|and|but|or|to|for|with|in|on|at|after|before|because|so|"
    r"it|they|them|when|as|about|from|of|up|out|too|one|all|again|now|here|there|really|just|"
    r"also|made|makes|helps|reminds|means)\b)[a-z-]{3,}\b"
)

# --- R3: small talk, reactions, feelings of the moment, platitudes --------------------------
LUCKY_RE = _rx(
    r"^(?:is|feels|has been)\s+(?:(?:so|really|very|super|truly)\s+)*(?:lucky|blessed)\b"
)
MOMENT_RE = _rx(
    r"^(?:is|was|felt|feels)\s+(?:(?:so|really|very|super|just|also|all|truly|pretty|totally|"
    r"completely|already)\s+)*"
    r"(?:lucky|blessed|grateful|thankful|excited|happy|glad|stoked|pumped|thrilled|proud|"
    r"inspired|hopeful|humbled|touched|honou?red|amazed|speechless|fulfilled|nervous|scared|"
    r"anxious|stressed|relieved|overwhelmed|content|determined|eager|a mix of \w+)\b"
    r"(?!\s+(?:to (?:have|be (?:a|an|part)|attend|go|visit)|about [A-Z]))"
)
PEP_TALK_RE = _rx(
    r"\b(?:keep(?:s|ing)? (?:on )?(?:going|pushing|trying|at it|chasing|pursuing|reaching|"
    r"working hard|dreaming|moving)|never (?:quit|give up|giving up|stop)|"
    r"stay(?:s|ing)? (?:positive|hopeful|strong|optimistic)|"
    r"(?<!helps them )stay(?:s|ing)? (?:focused|determined|motivated)|"
    r"believ(?:e|es|ing) in themselves|"
    r"what the future holds|best effort|make (?:a|the) (?:difference|most of it)|"
    r"(?:doing|hanging in) (?:alright|ok|okay|fine)|worth it|"
    r"hoping for the best|pushing forward|looking ahead|ups and downs|roller ?coaster|"
    r"keep(?:s|ing)? making a difference|give up on their dreams|trying new things|"
    r"(?:hard work|it) (?:paid|paying|pays) off|grinding|moving ahead|true sel(?:f|ves)|"
    r"make it work|pushing themselves|nothing but good|\bis key$|"
    r"dreams? (?:are|is) com|make a change|making a (?:real |big )?difference|lift(?:s|ing)? "
    r"(?:others|people) up|(?:using|giving) their voice|focusing on the positive|"
    r"looking forward to what|what's (?:coming|next|ahead)|where (?:\w+ )?takes them|"
    r"(?:creating|making) (?:\w+ )?memories|"
    r"having (?:such )?a (?:great|good|fun|wonderful) time|stay(?:s|ing)? close|"
    r"how (?:it|that|this) makes them feel|they feel (?:so |really )?(?:at peace|good|great|"
    r"happy|calm|relaxed|content))"
)
# A general truth, or how an experience felt, with no act or thing of the user's in it.
PLATITUDE_RE = _rx(
    r"^(?:life|life's|nature|nature's|pets|memories|moments?|nice moments|sometimes|"
    r"it's|that's|what a|being|having|knowing|finding|surrounding|imagining|investing|"
    r"challenges|handling|excited|couldn't|glad|proud|stoked|thrilled|truly felt|wish|"
    r"tomorrow's|today's|tonight's|the best part|everyone|everybody|blessed|time flies)\b|"
    # a generic subject's effect on the user: "Music brings them together and brings joy"
    r"^(?:music|family|family's|love|friends|friendship|kindness|support|art|nature|pets|"
    r"challenges|memories)\b.*\b(?:brings?|gives?|grounds|fills|helps?) them\b|"
    r"^(?:is starting to |has )?(?:realiz|realis|learn)\w* that\b|"
    # an activity said to matter: "Taking time for themselves is vital", "... is so important"
    r"^\w+ing\b[^.]*?\b(?:is|are|'s)\s+(?:(?:so|really|super|very|also|just|absolutely)\s+)*"
    r"(?:important|vital|crucial|essential|key|necessary|everything)\b(?! to them)"
)
# A reaction to what was seen or heard: "The energy was really motivating", "Seeing the smiles on
# their faces really made them feel good".
REACTION_RE = _rx(
    r"^the \w+ (?:was|were|is|are) (?:(?:so|really|just|truly|super)\s+)*(?:motivating|inspiring|"
    r"amazing|awesome|great|incredible|wonderful|unreal|insane|spectacular|breathtaking)\b|"
    r"^(?:seeing|hearing|knowing|watching|feeling)\b.*\b(?:made|makes|fills|filled|gives|gave) "
    r"them (?:feel|so|with|such)\b|^(?:seeing|hearing|watching)\b[^,]*\b(?:was|is) (?:so |really )?"
    r"(?:awesome|amazing|great|priceless|the best|incredible|wonderful)\b|"
    r"\bblows? them away\b|\bblowing them away\b|\bis infectious\b"
)
LISTENER_RE = _rx(r"\bthe assistant(?:'s)?\b")
EVALUATION_END_RE = _rx(
    r"\b(?:is|was|are|were|'s|been)\s+(?:(?:so|really|very|super|truly|pretty|just|beyond)\s+)*"
    r"(?:awesome|amazing|great|incredible|beyond words|wonderful|fantastic|the best|a blast)$"
)

# --- R4: something specific -----------------------------------------------------------------
# Words that say nothing a later question could use: evaluations, feelings, time words, and
# nouns that stand for anything ("something", "an event", "a project").
EMPTY = words(
    """something anything everything stuff thing things someone somewhere event events project
    projects experience experiences effort impact difference moment moments memories memory
    new big little few great nice good awesome amazing cool fun blast wonderful special
    incredible fantastic lovely beautiful tough hard rough rewarding important inspiring
    inspired feeling feel felt feels happy glad lucky excited grateful thankful proud
    last week weekend month year yesterday lately recently ago while day days weeks months
    years night soon later often always never sometimes usually today tonight morning
    went going started start starting did done doing had having got getting tried trying
    keep keeps kept lot lots way ways place places people folks them themselves they're
    they've definitely totally super pretty kinda sorta quite many much well better best
    ready okay alright positive hopeful motivated focused determined life news chance
    opportunity opportunities happened happen happens exciting interesting wild crazy emotions
    emotion mix overall progress working ton tons able idea ideas options give back see where
    right monday tuesday wednesday thursday friday saturday sunday time times goes support
    received input"""
)
# Words that say what a statement of the user's is like, not what it is about (R4, second
# round): verbs of liking and light verbs, abstract nouns of feeling and striving, people in
# general and words that only grade. "Loves helping others", "Their hard work is paying off",
# "Creativity and family keep them at peace" have nothing else; "Loves making dairy-free
# desserts" has two words beside them. A rule form's fact ("Loves the ocean") is not counted
# with them: its form says what it is.
GENERIC = words(
    """love loves loved loving like likes liked enjoy enjoys enjoyed enjoying appreciate
    cherish cherishes treasure treasures adore make makes making made take takes taking took
    come comes coming came get gets give gives gave given let lets bring brings bringing
    brought put putting share shares sharing shared help helps helped helping want wants
    wanted know knows knew figure figured seem seems seemed become becomes use uses grow
    growing meet meeting met see seeing saw seen tell told learn learns find finding found
    think thinking thought hope hoping hopes look looking looks
    work journey dream dreams reality challenge challenges success goal
    goals passion passions passionate joy happiness peace comfort strength confidence
    creativity inspiration motivation freedom unity acceptance self-acceptance growth
    care mind minds beauty stress worries worry feelings emotions encouragement connection
    connections balance adventure atmosphere reminder
    others everyone someone somebody anyone everybody
    huge real electric sweet peaceful calm bright thrilling carefree own same whole other
    another such"""
)
MIN_WORDS = 2  # specific words a fact needs (R4)
FIGURE_RE = re.compile(r"\b[A-Za-z]*\d[\w.-]*")
# What was done, said as "something": "Made something to catch the eye".
SOMETHING_RE = _rx(r"^(?:\w+ ){1,2}?(?:something|anything|stuff|some stuff|things|some things)\b")

# --- R5: a rewrite gone wrong ---------------------------------------------------------------
GARBLED_RE = _rx(
    r"^(?:\w+l(?:ie|y)s|mays|mights|musts|shoulds|oughts)\b|"  # "Completelies", "Mays"
    r"^(?:both|all|each)\s+(?:\w+s|had|have|were|are|got)\b|"  # "Both knows", "All had"
    r"^(?:of|than|and|or|because|since|though|although|whether|plus)\b|"  # no subject left
    # a reply's opener left in: "For sure, challenges ...", "Yup, they do- Oscar ..."
    r"^(?:yup|yep|yeah|for sure|for asking|problem|no problem|worries|no worries|of course|"
    r"totally|absolutely|far)\b[,.!-]|^\w+, (?-i:[A-Z])\w+$|^for them\b|"
    r"^(?-i:Don't|Haven't|Am|Are|Were)\b|"  # a first-person verb left without its "I"
    # a fragment: "Almost as silly as ...", "Both blood and the ones they choose"
    r"^(?:almost|especially|like|mostly|not|kind of|sorts? of|both (?!\w+s\b)\w+ and)\b|"
    r"\b(?:on|at|with|about|of) (?:for|with|at|of)\b|\bsome to\b|"  # "working on for a while"
    r"\b(?:who|what) they're\b|"  # "discover who they're"
    r"\b(?:doesn't|don't|didn't|isn't)s\b|\b\w+ns't\b|"  # "Didns't"
    r"^(?:is|was|has)\s+(?:both|all)\b(?!\s+(?:about|over|set|in|the|their|of)\b)|"  # "Is both"
    r"^\w+s and (?!\w+s\b)\w+\b(?=\s)"  # "Trusts and rely"
)
