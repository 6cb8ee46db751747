"""What the offline learning path keeps live from LoCoMo's dev turns, without a server.

The same steps as `Learning.learn` (memory/learning/learn.py) with the server's default
extractor and reconciler: per speaker's scope, each of their turns that gets a reply is read by
`RuleExtractor` with the scope's live facts as the recalled texts, the candidates are decided
by `SimilarityReconciler` on the offline MiniLM embedder, and ADD / UPDATE / DELETE are applied
to the scope's live facts. What is live at the end is written as JSON lines (conversation,
speaker, turn, fact text), one per live fact, in the order learned. Each candidate's event date
is resolved against its session's date, as the server does (a dated candidate is a new event,
never a restatement). The secret filter is left out: it changes no fact's words on this data.

    .venv/bin/python bench/fact_quality/learned.py [--data PATH] [--out PATH] [--no-precise]
        [--restated-at COSINE] [--no-probe]

`--no-precise` learns without the quality rules and restatement checks
(`RuleExtractor(precise=False)`, no `restated_at`): what the path learned before them.
`--restated-at` sets the reconciler's cut-off for a restatement in other words (default: the
server's, `RESTATED_AT`); `--no-probe` learns without the fact probe (memory/facts/probe.py).

The data is read in place (CC BY-NC 4.0, never copied into the project); only the learned fact
texts are written.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from locomo_data import DEFAULT_DATA, Conversation, load  # noqa: E402

from memory_server.embedding.minilm import MiniLMBackend  # noqa: E402
from memory_server.extraction.event_dates import DateparserEvents  # noqa: E402
from memory_server.memory.facts.meaning import RESTATED_AT  # noqa: E402
from memory_server.memory.facts.model import Decision, LiveFact  # noqa: E402
from memory_server.memory.facts.probe import FactProbe  # noqa: E402
from memory_server.memory.facts.reconcile import SimilarityReconciler  # noqa: E402
from memory_server.memory.learning.extract import RuleExtractor  # noqa: E402
from memory_server.memory.ports import ExtractionInput  # noqa: E402
from memory_server.memory.time.event_time import said_when  # noqa: E402


class Learned(TypedDict):
    """One live fact at the end, as written to the output."""

    conversation: str
    speaker: str
    turn: str  # the dia_id it was learned from
    fact: str
    self_statement: bool  # a self statement said it, not a rule form
    kind: str  # the fact's kind (FactKind's value)


class _Embedder:
    """The MiniLM backend as the reconciler's `Embedder`, with every text embedded once."""

    def __init__(self) -> None:
        self._backend = MiniLMBackend()
        self._backend.load()
        self._cache: dict[str, list[float]] = {}

    @property
    def model_name(self) -> str:
        return self._backend.model_name

    @property
    def dimension(self) -> int:
        return self._backend.dimension

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        todo = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if todo:
            self._cache.update(zip(todo, self._backend.embed_batch(todo), strict=True))
        return [self._cache[t] for t in texts]


async def learn_side(
    conversation: Conversation,
    speaker: str,
    extractor: RuleExtractor,
    reconciler: SimilarityReconciler,
    events: DateparserEvents,
) -> list[Learned]:
    """The live facts of one speaker's scope after every answered turn of theirs is learned."""
    # fact id -> (fact, the turn it came from, whether a self statement said it)
    live: dict[str, tuple[LiveFact, str, bool]] = {}
    turns = conversation.turns
    next_id = 0
    for i, turn in enumerate(turns):
        reply = turns[i + 1] if i + 1 < len(turns) else None
        if turn.speaker != speaker or reply is None or reply.session != turn.session:
            continue  # only a turn with a reply is learned from (CompleteTurn)
        known = [f for f, _, _ in live.values()]
        turn_input = ExtractionInput(turn.text, reply.text, recalled=[f.text for f in known])
        candidates = await said_when(extractor.extract_sync(turn_input), turn.said_at, events)
        if not candidates:
            continue
        for d in await reconciler.reconcile(candidates, known):
            c = d.candidate
            if d.decision is Decision.ADD:
                next_id += 1
                fid = f"f{next_id}"
                live[fid] = (LiveFact(fid, fid, c.text, c.kind), turn.dia_id, c.self_statement)
            elif d.decision is Decision.UPDATE and d.target_fact_id in live:
                old = live[d.target_fact_id][0]
                updated = LiveFact(old.fact_id, old.fact_id, c.text, c.kind)
                live[d.target_fact_id] = (updated, turn.dia_id, c.self_statement)
            elif d.decision is Decision.DELETE:
                live.pop(d.target_fact_id, None)
    return [
        {
            "conversation": conversation.sample_id,
            "speaker": speaker,
            "turn": dia,
            "fact": f.text,
            "self_statement": said_so,
            "kind": f.kind.value,
        }
        for f, dia, said_so in live.values()
    ]


async def learn_all(
    data: Path,
    *,
    precise: bool = True,
    restated_at: float | None = RESTATED_AT,
    probe: bool = True,
) -> list[Learned]:
    """What is live at the end, as the server learns it; `probe` False leaves the probe out
    (what `probe.py` trains and measures it on)."""
    extractor = RuleExtractor(precise=precise)
    embedder = _Embedder()
    judge = FactProbe.for_model(embedder.model_name) if precise and probe else None
    reconciler = SimilarityReconciler(
        embedder, restated_at=restated_at if precise else None, probe=judge
    )
    events = DateparserEvents()
    out: list[Learned] = []
    for conversation in load(data):
        for speaker in dict.fromkeys(t.speaker for t in conversation.turns):
            out += await learn_side(conversation, speaker, extractor, reconciler, events)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--out", type=Path, default=Path("/tmp/learned_facts.jsonl"))
    parser.add_argument("--no-precise", action="store_true", help="without the quality rules")
    parser.add_argument("--restated-at", type=float, default=RESTATED_AT)
    parser.add_argument("--no-probe", action="store_true", help="without the fact probe")
    args = parser.parse_args()
    began = time.perf_counter()
    facts = asyncio.run(
        learn_all(
            args.data,
            precise=not args.no_precise,
            restated_at=args.restated_at,
            probe=not args.no_probe,
        )
    )
    with args.out.open("w", encoding="utf-8") as f:
        for row in facts:
            f.write(json.dumps(row) + "\n")
    print(f"{len(facts)} live facts in {time.perf_counter() - began:.1f} s -> {args.out}")


if __name__ == "__main__":
    main()
