"""Word-level helpers the extractors share: content words (to compare a fact with what is
already known) and the third-person form of a verb (to write facts as "Prefers ...")."""

from __future__ import annotations

import functools
import re

from memory_server.memory.facts.shape import normalise

_STOP_WORDS = """
    i me my we our us you your the a an to of in on for and or is are am be been it its that this
    with as at by from so please now actually really just wants want assistant user users they
    them their was were will do does did has have had there here than then also very"""
_STOP = frozenset(_STOP_WORDS.split())
_IRREGULAR = {"have": "has", "be": "is", "do": "does", "go": "goes"}


@functools.lru_cache(maxsize=16384)
def content_words(text: str) -> frozenset[str]:
    """Lower-cased content words, lightly stemmed ("prefers" = "prefer", "stopped" = "stop");
    "n't" becomes "not", so that "doesn't like" differs from "likes". Cached: the same live
    facts come back on every turn of a scope."""
    words: set[str] = set()
    for token in normalise(text).split():
        word = token
        if word.endswith("n't"):
            words.add("not")
            word = word[:-3]
        word = word.removesuffix("'s")
        if not word or word in _STOP:
            continue
        if len(word) > 4 and word.endswith("ies"):
            word = word[:-3] + "y"
        elif len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        for suffix in ("ing", "ed"):
            if len(word) > len(suffix) + 3 and word.endswith(suffix):
                word = word[: -len(suffix)]
                word = word[:-1] if len(word) > 2 and word[-1] == word[-2] else word
        words.add(word[:-1] if len(word) > 4 and word.endswith("e") else word)
    return frozenset(words)


def third_singular(verb: str) -> str:
    """ "prefer" → "prefers", "watch" → "watches", "try" → "tries", "have" → "has"."""
    if verb in _IRREGULAR:
        return _IRREGULAR[verb]
    if re.search(r"(?:s|sh|ch|x|z|o)$", verb):
        return verb + "es"
    if re.search(r"[^aeiou]y$", verb):
        return verb[:-1] + "ies"
    return verb + "s"
