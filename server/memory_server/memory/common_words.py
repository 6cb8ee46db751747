"""The question that recall embeds leaves out the scope's common words.

A word that most of a scope's facts contain says nothing about which fact a question means:
the lexical signal already weighs it by its idf (store.facts.lexical), but in a question's
embedding it pulls the vector towards every fact that names it. On LoCoMo every turn starts
with its speaker's name, and "What kind of art does Caroline make?" embedded whole ranks
"Caroline: ..." turns about anything above Melanie's "Caroline, your painting is lovely";
embedded as "What kind of art does make?" it finds the painting. So the words of a question
that more than `ltm_common_word_share` of the scope's facts believed at the as-of point contain
are dropped from the text the vector signal embeds, if at least MIN_FACTS facts contain them (a
question that would be left without a word is embedded whole). The share was chosen from the
flat region of a sweep on LoCoMo's dev split (bench/README.md).
"""

from __future__ import annotations

import re
from collections.abc import Collection

# A word as typed: letters or digits, with inner apostrophes and hyphens ("Caroline's").
_WORD = re.compile(r"[^\W_](?:[\w'’-]*[^\W_])?")
# A word is common only in at least this many facts: in a scope of three facts about one
# convention, "convention" is in all of them and still what a question about it means.
MIN_FACTS = 10
# At most this many distinct words of a question are looked up (a pasted essay is not a
# question, and its common words barely move its embedding).
MAX_WORDS = 64


def words(question: str) -> list[str]:
    """The question's distinct words, in order, at most MAX_WORDS."""
    return list(dict.fromkeys(m.group(0) for m in _WORD.finditer(question)))[:MAX_WORDS]


def without(question: str, common: Collection[str]) -> str:
    """The question without the `common` words; the whole question if none would be left."""
    if not common:
        return question
    kept = _WORD.sub(lambda m: "" if m.group(0) in common else m.group(0), question)
    kept = re.sub(r"\s+", " ", kept).strip()
    return kept if _WORD.search(kept) else question
