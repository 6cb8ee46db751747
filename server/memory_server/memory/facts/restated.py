"""Which candidate facts only say again what is known: what recall put in the turn's context,
or another candidate of the same turn."""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Sequence

from memory_server.memory.facts.model import Candidate
from memory_server.memory.facts.shape import normalise, same_slot, shape_of, words
from memory_server.memory.facts.values import Values, introduces, values_of
from memory_server.memory.learning.words import content_words

_shape = functools.lru_cache(maxsize=16384)(shape_of)
_key = functools.lru_cache(maxsize=16384)(normalise)
# Where a fact's main clause ends and what it adds begins: "Took the first step towards becoming a
# mom - they applied to adoption agencies", "Is reading Dune. It's a great story".
_HEAD_RE = re.compile(r"\s+[-–—]+\s+|[.!?:;]\s+|,\s+(?:but|and|so|which|it|they)\b")
# Stems of the verbs of liking, as content_words leaves them: "Loves turtles" restates "Has
# always liked turtles".
_LIKING = words("love lov loved like lik liked enjoy enjoyed adore")
# Words that say a fact holds still, not what it is: "Is still volunteering at the shelter",
# "Is carrying on volunteering at the youth center".
_ASIDES = words(
    """still also too again even usual usually always lately currently definitely totally much
    lot lots really truly very carry carrying continu"""
)
# Words that say the same of the user: "Is thankful for ..." restates "Is grateful for ...".
_SAME = {"thankful": "grateful", "pup": "puppy", "kid": "child", "fam": "family"}


def _plain(text: str) -> frozenset[str]:
    """The content words of `text` as `restates` compares them."""
    out: set[str] = set()
    for w in content_words(text) - _ASIDES:
        out.add("like" if w in _LIKING else _SAME.get(w, w))
    return frozenset(out)


class Recalled:
    """The turn's recalled texts, indexed on first use: most turns state no fact at all, and
    a scope may have a thousand live facts."""

    def __init__(self, texts: Sequence[str]) -> None:
        self._texts = [t for t in texts if t.strip()]
        self._keys: set[str] | None = None
        self._postings: dict[str, list[int]] = {}
        self._known: list[tuple[frozenset[str], Values]] | None = None

    def repeats(self, text: str) -> bool:
        """True when `text` is a recalled text again: the same words, or >= 80 % of its
        content words in one recalled text, naming no figure or name it does not
        (memory.facts.values)."""
        if not self._texts:
            return False
        if self._keys is None:
            self._keys = {_key(t) for t in self._texts}
            for i, t in enumerate(self._texts):
                for word in content_words(t):
                    self._postings.setdefault(word, []).append(i)
        if normalise(text) in self._keys:
            return True
        mine = content_words(text)
        hits = Counter(i for word in mine for i in self._postings.get(word, ()))
        # "... JIRA-9983 for the login bug" is no repeat of "... JIRA-4411 ...": a new value.
        values = values_of(text)
        # "Likes jazz" is no repeat of "Doesn't like jazz": the stance changed.
        return bool(mine) and any(
            n >= 0.8 * len(mine)
            and not introduces(values, values_of(self._texts[i]))
            and ("not" in mine) == ("not" in content_words(self._texts[i]))
            for i, n in hits.items()
        )

    def restates(self, text: str) -> bool:
        """True when a candidate fact says a recalled text again in other words: `repeats`,
        or, with the verbs of liking taken as one, a few near synonyms as one and the words
        that only say it still holds left out, >= 80 % of its words or of its main clause's
        (what follows is a comment or a detail of it) are in one recalled text ("Loves
        turtles" after "Has always liked turtles since they were a boy", "Is still volunteering
        at the shelter. It's fulfilling" after "Volunteers at the shelter")."""
        if self.repeats(text):
            return True
        head = _HEAD_RE.split(text, maxsplit=1)[0]
        if self._known is None:
            self._known = [(_plain(t), values_of(t)) for t in self._texts]
        for part in {text, head}:
            mine, values = _plain(part), values_of(part)
            if len(mine) < 2:
                continue
            if any(
                len(mine & theirs) >= 0.8 * len(mine)
                and ("not" in mine) == ("not" in theirs)
                and not introduces(values, known_values)
                for theirs, known_values in self._known
            ):
                return True
        return False

    def same_slot(self, text: str, lasting: bool) -> bool:
        """Whether "from now on" marks a change: only when recall showed a fact on that slot."""
        if not lasting:
            return False
        shape = _shape(text)
        return any(same_slot(shape, _shape(t)) for t in self._texts)


def unique(candidates: Sequence[Candidate]) -> list[Candidate]:
    """`candidates` without repeats (same words, same retraction flag), first ones kept."""
    seen: set[tuple[str, bool]] = set()
    out: list[Candidate] = []
    for c in candidates:
        if (key := (normalise(c.text), c.retraction)) not in seen:
            seen.add(key)
            out.append(c)
    return out
