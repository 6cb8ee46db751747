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

Such a word written with a capital ("Caroline", "Caroline's") names the question's **subject**: on
LoCoMo nearly all the turns a question about Caroline needs are hers, and half of the scope is the
other speaker's (bench/README.md "Subjects"). Its idf is low because so many facts name it, so the
lexical signal barely tells her facts from the others'. Recall therefore weighs a fact that names
none of the question's subjects (the word, case-insensitive, alone or with 's) by
`ltm_off_subject_weight` (0.8, from the flat region 0.7-0.9 of the same sweep): it still competes, a
little lower. A lower-case common word ("python" in a scope of Python notes) is left out of the
embedding but is no subject.
"""

from __future__ import annotations

import re
import time
from collections import OrderedDict
from collections.abc import Callable, Collection
from dataclasses import dataclass

from memory_server.memory.identity import Scope
from memory_server.memory.ports import AsOf, FactStore

# A word as typed: letters or digits, with inner apostrophes and hyphens ("Caroline's").
_WORD = re.compile(r"[^\W_](?:[\w'’-]*[^\W_])?")
# A word is common only in at least this many facts: in a scope of three facts about one
# convention, "convention" is in all of them and still what a question about it means.
MIN_FACTS = 10
# At most this many distinct words of a question are looked up (a pasted essay is not a
# question, and its common words barely move its embedding).
MAX_WORDS = 64
_POSSESSIVE = re.compile(r"['’]s$")


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


@dataclass(frozen=True, slots=True)
class VectorQuestion:
    """What the vector signal embeds for a question, and the question's subjects."""

    text: str
    subjects: tuple[str, ...] = ()


def naming(subjects: Collection[str]) -> re.Pattern[str] | None:
    """A pattern that finds any of `subjects` in a fact's text: the word alone or with 's,
    case-insensitive ("Caroline's" names Caroline). None without subjects."""
    bases = dict.fromkeys(_POSSESSIVE.sub("", s) for s in subjects)
    bases.pop("", None)
    if not bases:
        return None
    alternatives = "|".join(re.escape(b) for b in bases)
    return re.compile(rf"\b(?:{alternatives})(?:['’]s)?\b", re.IGNORECASE)


def subjects_of(common: Collection[str]) -> tuple[str, ...]:
    """The common words written with a capital: the names a question is about."""
    return tuple(w for w in common if w[:1].isupper())


def subject_weight(subjects: Collection[str], off: float) -> Callable[[str], float] | None:
    """A fact text's weight: 1 when it names one of `subjects`, else `off`
    (ltm_off_subject_weight). None when nothing is weighed: no subject, or `off` at 1."""
    pattern = naming(subjects) if off < 1 else None
    if pattern is None:
        return None
    return lambda text: 1.0 if pattern.search(text) else off


class CommonWords:
    """The question recall embeds, without the scope's common words.

    For a search as of now (every turn's recall), the scope's common lexemes are read once and
    kept for CACHE_TTL_S, or until this server changes the scope's facts (`forget`); then a
    question costs one small query that stems the words this server has not seen before, or
    none when the scope has no common word or every word was seen. Another server's writes
    are seen within CACHE_TTL_S: a common word is common in hundreds of facts, so a few facts
    more or less rarely change it. A search as of another time asks the database for the
    words common at that point, uncached."""

    CACHE_TTL_S = 30.0
    MAX_SCOPES = 4096
    MAX_STEMS = 65536  # distinct words whose lexemes are kept

    def __init__(
        self,
        store: FactStore,
        share: float,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._share = share
        self._clock = clock
        self._scopes: OrderedDict[str, tuple[float, frozenset[str]]] = OrderedDict()
        self._stems: OrderedDict[str, tuple[str, ...]] = OrderedDict()

    async def question(
        self, scope: Scope, question: str, as_of: AsOf, timeout_s: float | None = None
    ) -> VectorQuestion:
        if self._share <= 0:
            return VectorQuestion(question)
        tokens = words(question)
        if not tokens:
            return VectorQuestion(question)
        lexemes = await self._scope_lexemes(scope, as_of, timeout_s)
        if not lexemes:
            return VectorQuestion(question)
        stems = await self._stems_of(tokens, timeout_s)
        common = [t for t in tokens if stems.get(t) and lexemes.issuperset(stems[t])]
        return VectorQuestion(without(question, common), subjects_of(common))

    async def _stems_of(self, tokens: list[str], timeout_s: float | None) -> dict[str, list[str]]:
        """Each token's lexemes, from PostgreSQL's English stemmer the first time a word is
        seen and from memory after that: stemming does not change, so a turn whose words were
        all seen before costs no query."""
        missing = [t for t in tokens if t not in self._stems]
        if missing:
            found = await self._store.lexemes_of(missing, timeout_s=timeout_s)
            for token in missing:
                self._stems[token] = tuple(found.get(token, ()))
            while len(self._stems) > self.MAX_STEMS:
                self._stems.popitem(last=False)
        out = {}
        for token in tokens:
            stems = self._stems.get(token)
            if stems is not None:
                self._stems.move_to_end(token)
                out[token] = list(stems)
        return out

    def forget(self, scope: Scope) -> None:
        """This server changed the scope's facts: read its common lexemes again next time."""
        self._scopes.pop(scope.scope_hash, None)

    async def _scope_lexemes(
        self, scope: Scope, as_of: AsOf, timeout_s: float | None
    ) -> frozenset[str]:
        if as_of != AsOf():
            return await self._common_lexemes(scope, as_of, timeout_s)
        key = scope.scope_hash
        now = self._clock()
        kept = self._scopes.get(key)
        if kept is not None and now - kept[0] < self.CACHE_TTL_S:
            self._scopes.move_to_end(key)
            return kept[1]
        found = await self._common_lexemes(scope, as_of, timeout_s)
        self._scopes[key] = (now, found)
        self._scopes.move_to_end(key)
        while len(self._scopes) > self.MAX_SCOPES:
            self._scopes.popitem(last=False)
        return found

    async def _common_lexemes(
        self, scope: Scope, as_of: AsOf, timeout_s: float | None
    ) -> frozenset[str]:
        found = await self._store.common_lexemes(
            scope, self._share, MIN_FACTS, as_of, timeout_s=timeout_s
        )
        return frozenset(found)
