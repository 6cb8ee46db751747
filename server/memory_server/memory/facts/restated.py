"""Which candidate facts only say again what is known: what recall put in the turn's context,
or another candidate of the same turn."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Sequence

from memory_server.memory.facts.model import Candidate
from memory_server.memory.facts.shape import normalise, same_slot, shape_of
from memory_server.memory.facts.values import introduces, values_of
from memory_server.memory.learning.words import content_words

_shape = functools.lru_cache(maxsize=16384)(shape_of)
_key = functools.lru_cache(maxsize=16384)(normalise)


class Recalled:
    """The turn's recalled texts, indexed on first use: most turns state no fact at all, and
    a scope may have a thousand live facts."""

    def __init__(self, texts: Sequence[str]) -> None:
        self._texts = [t for t in texts if t.strip()]
        self._keys: set[str] | None = None
        self._postings: dict[str, list[int]] = {}

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
        return bool(mine) and any(
            n >= 0.8 * len(mine) and not introduces(values, values_of(self._texts[i]))
            for i, n in hits.items()
        )

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
