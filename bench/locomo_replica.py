"""An offline replica of SearchFacts' ranking on LoCoMo, for sweeping recall constants quickly.

    .venv/bin/python bench/locomo_replica.py [--data PATH] [--limit-conversations N]

It stores nothing in a server: it computes what the server would (the reference setup of
bench/locomo_recall.py: "Speaker: text [shares <caption>]", valid from its session's time plus
its turn number in seconds, one conversation per session) and ranks every category 1-4
question the way LongTermMemory.search does, with the server's own parts where it can:

- PostgreSQL's English stemmer (an embedded PostgreSQL in a temp dir) for the facts', the
  questions' and each question word's lexemes; coverage with BM25 idf as store.facts.lexical
  computes it; the CANDIDATES_PER_SIGNAL best of each signal (memory.recall.search), ranked
  by memory.recall.rank;
- the offline MiniLM model (embedding.minilm) for the vectors, exact cosine;
- memory.time_intent.dated_vote with dateparser's event times (extraction.event_dates);
- memory.recall.common_words for the question the vector signal embeds, at each share swept, and for
  the question's subjects (its common words written with a capital): a fact (or neighbour)
  that names none of them scores ltm_off_subject_weight times its score;
- neighbours: the turns just before and after each of the ltm_link_seeds best hits in its
  session, at source score x decay (memory.recall.expand).

The server's default settings (memory_server.settings) fill in what is not swept. Not
replicated: semantic links (+0.07 points on this data, bench/README.md). The server's R@10 is
within a few tenths of this replica's (bench/README.md). It prints R@10 ± SE overall and per
category for each swept value.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import statistics
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import numpy as np
from locomo_data import CATEGORIES, DEFAULT_DATA, Conversation, Question, Turn, load

from memory_server.embedding.minilm import MiniLMBackend
from memory_server.extraction.event_dates import DateparserEvents
from memory_server.memory.facts.model import EventTime, FactKind, FactVersion
from memory_server.memory.ports import LinkedVersion
from memory_server.memory.recall.common_words import (
    MIN_FACTS,
    subject_weight,
    subjects_of,
    without,
    words,
)
from memory_server.memory.recall.expand import ExpandSettings, expand, seeds
from memory_server.memory.recall.rank import rank
from memory_server.memory.recall.search import CANDIDATES_PER_SIGNAL
from memory_server.memory.time.intent import dated_vote
from memory_server.settings import Settings
from memory_server.store.embedded import EmbeddedPostgres

DEFAULTS = Settings()  # what the server runs with, where the sweep does not say
_INGESTED = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass
class Scope:
    conversation: Conversation
    texts: list[str]
    lexemes: list[set[str]]
    vectors: np.ndarray
    versions: list[FactVersion]  # version_id: the turn's dia_id
    df: dict[str, int]
    turn_of: dict[str, int] = field(init=False)  # version_id -> index in turns

    def __post_init__(self) -> None:
        self.turn_of = {v.version_id: i for i, v in enumerate(self.versions)}

    @property
    def n(self) -> int:
        return len(self.texts)

    def idf(self, word: str) -> float:
        df = self.df.get(word, 0)
        return math.log(1 + (self.n - df + 0.5) / (df + 0.5))

    def coverage(self, query: Sequence[str]) -> dict[int, float]:
        distinct = list(dict.fromkeys(query))
        weights = {w: self.idf(w) for w in distinct}
        total = sum(weights.values())
        out: dict[int, float] = {}
        for i, have in enumerate(self.lexemes):
            hit = sum(weights[w] for w in distinct if w in have)
            if hit:
                out[i] = min(1.0, hit / total)
        return out

    def session_neighbours(self, i: int) -> list[int]:
        turns = self.conversation.turns
        return [
            j
            for j in (i - 1, i + 1)
            if 0 <= j < len(turns) and turns[j].session == turns[i].session
        ]


async def _lexemes(texts: list[str]) -> dict[str, list[str]]:
    with tempfile.TemporaryDirectory(prefix="locomo-replica-") as scratch:
        async with EmbeddedPostgres(Path(scratch)) as pg:
            conn = await asyncpg.connect(pg.dsn)
            try:
                rows = await conn.fetch(
                    """SELECT t, tsvector_to_array(to_tsvector('english', t)) AS a
                       FROM unnest($1::text[]) t""",
                    texts,
                )
            finally:
                await conn.close()
    return {str(r["t"]): list(r["a"]) for r in rows}


def _embed(model: MiniLMBackend, texts: list[str]) -> dict[str, np.ndarray]:
    distinct = list(dict.fromkeys(texts))
    out: dict[str, np.ndarray] = {}
    for i in range(0, len(distinct), 64):
        batch = distinct[i : i + 64]
        for text, vector in zip(batch, model.embed_batch(batch), strict=True):
            out[text] = np.asarray(vector, dtype=np.float32)
    return out


class Replica:
    def __init__(self, conversations: list[Conversation]) -> None:
        self.events = DateparserEvents()
        self.model = MiniLMBackend()
        self.model.load()
        questions = [q.text for c in conversations for q in c.questions]
        tokens = [w for q in questions for w in words(q)]
        turns = [t.memory_text for c in conversations for t in c.turns]
        self.lex = asyncio.run(_lexemes(list(dict.fromkeys([*turns, *questions, *tokens]))))
        vectors = _embed(self.model, turns)
        self.vectors = vectors
        self.scopes: list[Scope] = []
        for c in conversations:
            texts = [t.memory_text for t in c.turns]
            lexemes = [set(self.lex[t]) for t in texts]
            df: dict[str, int] = {}
            for have in lexemes:
                for w in have:
                    df[w] = df.get(w, 0) + 1
            versions = [self._version(t, i) for i, t in enumerate(c.turns)]
            stacked = np.stack([vectors[t] for t in texts])
            self.scopes.append(Scope(c, texts, lexemes, stacked, versions, df))
        now = datetime.now(UTC)
        self.asked: dict[str, EventTime | None] = {
            q: self.events.resolve(q, now) if self.events.needs_resolving(q) else None
            for q in questions
        }
        self._queries: dict[str, np.ndarray] = {}

    def _version(self, turn: Turn, k: int) -> FactVersion:
        """Turn k as locomo_recall's reference setup stores it: valid from when it was said,
        recorded in dialogue order (recorded_at breaks the server's ties in score)."""
        text, said = turn.memory_text, turn.spoken_at
        event = self.events.resolve(text, said) if self.events.needs_resolving(text) else None
        recorded = _INGESTED + timedelta(milliseconds=k)
        return FactVersion(
            turn.dia_id, turn.dia_id, text, FactKind.OTHER, said, None, recorded, None,
            event_at=event.at if event else None,
            event_period=event.period.value if event else "",
        )  # fmt: skip

    def query_vector(self, text: str) -> np.ndarray:
        if text not in self._queries:
            self._queries.update(_embed(self.model, [text]))
        return self._queries[text]

    def common(self, scope: Scope, question: str, share: float) -> list[str]:
        if share <= 0:
            return []
        common = []
        for token in words(question):
            lx = self.lex.get(token) or []
            if lx and min(scope.df.get(w, 0) for w in lx) > max(share * scope.n, MIN_FACTS - 1):
                common.append(token)
        return common

    def ranking(
        self, scope: Scope, q: Question, share: float, decay: float, off_subject: float = 1.0
    ) -> list[str]:
        """The question's dia_ids as SearchFacts ranks them (memory.recall.search.Recall)."""
        common = self.common(scope, q.text, share)
        of_text = subject_weight(subjects_of(common), off_subject)
        weight = None if of_text is None else (lambda v: of_text(v.text))
        cos = scope.vectors @ self.query_vector(without(q.text, common))
        by_vector = np.argsort(-cos)[:CANDIDATES_PER_SIGNAL]
        cosines = {scope.versions[i].version_id: float(cos[i]) for i in by_vector}
        coverage = scope.coverage(self.lex[q.text])
        by_words = sorted(coverage, key=lambda i: (-coverage[i], -i))[:CANDIDATES_PER_SIGNAL]
        coverages = {scope.versions[i].version_id: coverage[i] for i in by_words}
        ranked = rank(
            {vid: scope.versions[scope.turn_of[vid]] for vid in [*cosines, *coverages]},
            cosines,
            coverages,
            top_k=None,
            threshold=0.0,
            extra_vote=dated_vote(q.text, DEFAULTS.ltm_time_intent_weight, self.asked[q.text]),
            weight=weight,
        )
        # Neighbours only: links are not replicated (module docstring).
        expansion = ExpandSettings(decay=0.0, seeds=DEFAULTS.ltm_link_seeds, neighbour_decay=decay)
        linked = [
            LinkedVersion(source, scope.versions[j], 1.0, neighbour=True)
            for source in seeds(ranked, expansion)
            for j in scope.session_neighbours(scope.turn_of[source])
        ]
        found = expand(ranked, linked, expansion, top_k=scope.n, threshold=0.0, weight=weight)
        return [s.version.version_id for s in found]


def recall_row(per: list[tuple[int, float]]) -> str:
    def cell(values: list[float]) -> str:
        se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else 0.0
        return f"{100 * statistics.fmean(values):5.1f} ±{100 * se:3.1f}"

    cells = [cell([r for _, r in per])]
    cells += [cell([r for c, r in per if c == cat]) for cat in CATEGORIES]
    return "  ".join(cells)


def evaluate(replica: Replica, share: float, decay: float, off_subject: float = 1.0) -> str:
    per: list[tuple[int, float]] = []
    for scope in replica.scopes:
        for q in scope.conversation.questions:
            top = set(replica.ranking(scope, q, share, decay, off_subject)[:10])
            per.append((q.category, len(q.evidence & top) / len(q.evidence)))
    return recall_row(per)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo json (read in place)")
    p.add_argument("--limit-conversations", type=int, help="first N conversations")
    args = p.parse_args(argv)
    conversations = load(args.data, args.limit_conversations)
    replica = Replica(conversations)
    header = "R@10 ± SE        all" + "".join(f"  {n:>11}" for n in CATEGORIES.values())
    print(header)
    print("ltm_common_word_share (neighbours off)")
    for share in (0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5):
        print(f"  {share:<12} {evaluate(replica, share, 0)}")
    share, decay = DEFAULTS.ltm_common_word_share, DEFAULTS.ltm_neighbour_decay
    print(f"ltm_neighbour_decay (share {share})")
    for d in (0.0, 0.5, 0.6, 0.7, 0.75, 0.8, 0.9, 1.0):
        print(f"  {d:<12} {evaluate(replica, share, d)}")
    print(f"ltm_off_subject_weight (share {share}, decay {decay})")
    for off in (0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 1.0):
        print(f"  {off:<12} {evaluate(replica, share, decay, off)}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
