"""What the offline rule extractor keeps from LoCoMo's turns, without a server.

Each turn's text is given to the extractor as the user's words (the speaker is the user), with
the facts already kept from that speaker as the recalled texts, as the learning path does.
Prints the facts per turn, their kinds, the extraction time per turn, the share of LoCoMo's
per-session `observation` source turns from which at least one fact was kept (a proxy: the
end-to-end benchmark decides a match fact by fact), the share of the questions' evidence turns
from which one was kept (a ceiling on recall through learning), and a random sample of what was
kept (`--only-self`: of what only the self statements keep). `--no-self` runs the rule forms
alone; `--sweep-self` varies the self statements' two limits (memory/learning/self_statements.py).

    .venv/bin/python bench/locomo_extract.py [--data PATH] [--sample 25] [--seed 1]
        [--no-self | --only-self | --sweep-self]

The data is read in place (CC BY-NC 4.0, never copied into the project).
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from locomo_data import DEFAULT_DATA, canonical, load

from memory_server.memory.learning import self_statements
from memory_server.memory.learning.extract import RuleExtractor
from memory_server.memory.ports import ExtractionInput


def _observation_turns(path: Path) -> dict[str, set[str]]:
    """sample id → the dia_ids LoCoMo's observations cite as their source."""
    out: dict[str, set[str]] = {}
    for sample in json.loads(path.read_text(encoding="utf-8")):
        ids: set[str] = set()
        for per_speaker in sample.get("observation", {}).values():
            for items in per_speaker.values():
                for _, dia_id in items:
                    for part in str(dia_id).replace(",", " ").replace(";", " ").split():
                        if (c := canonical(part)) is not None:
                            ids.add(c)
        out[sample["sample_id"]] = ids
    return out


@dataclass
class Pass:
    """What one pass of the extractor over every dev turn kept."""

    turns: int = 0
    turns_with_facts: int = 0
    retractions: int = 0
    elapsed_s: float = 0.0
    sources: int = 0  # observation source turns
    covered: int = 0  # ... from which a fact was kept
    evidence: int = 0  # question evidence turns (categories 1-4)
    evidence_covered: int = 0  # ... from which a fact was kept
    kinds: Counter[str] = field(default_factory=Counter)
    kept: list[tuple[str, str, str]] = field(default_factory=list)  # (where, turn text, fact)

    @property
    def facts(self) -> int:
        return sum(self.kinds.values())


def extract_all(data: Path, extractor: RuleExtractor) -> Pass:
    observed = _observation_turns(data)
    out = Pass()
    for conversation in load(data):
        known: dict[str, list[str]] = {}
        from_turns: set[str] = set()
        for turn in conversation.turns:
            recalled = known.setdefault(turn.speaker, [])
            start = time.perf_counter()
            found = extractor.extract_sync(ExtractionInput(turn.text, "", tuple(recalled)))
            out.elapsed_s += time.perf_counter() - start
            out.turns += 1
            if found:
                out.turns_with_facts += 1
                from_turns.add(turn.dia_id)
            for c in found:
                out.kinds[c.kind.value] += 1
                out.retractions += c.retraction
                if not c.retraction:
                    recalled.append(c.text)
                    out.kept.append((f"{conversation.sample_id} {turn.dia_id}", turn.text, c.text))
        sources = observed.get(conversation.sample_id, set())
        out.sources += len(sources)
        out.covered += len(sources & from_turns)
        for question in conversation.questions:
            out.evidence += len(question.evidence)
            out.evidence_covered += len(question.evidence & from_turns)
    return out


def sweep_self(data: Path) -> None:
    """The self statements' two limits varied one at a time around the defaults: what is kept,
    and how much of what LoCoMo's observations and questions point at it covers."""
    defaults = (self_statements.MIN_CONTENT_WORDS, self_statements.MAX_WORDS)
    print("min words  max words  facts/turn  turns with a fact  observation turns  evidence turns")
    rows = [(m, defaults[1]) for m in (2, 3, 4, 5)] + [(defaults[0], m) for m in (20, 25, 40)]
    for min_words, max_words in rows:
        self_statements.MIN_CONTENT_WORDS, self_statements.MAX_WORDS = min_words, max_words
        r = extract_all(data, RuleExtractor())
        print(
            f"{min_words:9}  {max_words:9}  {r.facts / r.turns:10.3f}  "
            f"{100 * r.turns_with_facts / r.turns:16.1f}%  {100 * r.covered / r.sources:16.1f}%  "
            f"{100 * r.evidence_covered / r.evidence:13.1f}%"
        )
    self_statements.MIN_CONTENT_WORDS, self_statements.MAX_WORDS = defaults


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--sample", type=int, default=25)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-self", action="store_true", help="the rule forms only")
    parser.add_argument(
        "--only-self", action="store_true", help="sample only facts the forms alone do not keep"
    )
    parser.add_argument(
        "--sweep-self", action="store_true", help="vary the self statements' limits"
    )
    args = parser.parse_args()
    if args.sweep_self:
        sweep_self(args.data)
        return
    r = extract_all(args.data, RuleExtractor(self_statements=not args.no_self))
    print(
        f"turns {r.turns}, facts {r.facts} ({r.facts / r.turns:.3f} per turn), "
        f"retractions {r.retractions}"
    )
    print(f"turns with a fact {r.turns_with_facts} ({100 * r.turns_with_facts / r.turns:.1f} %)")
    print("kinds " + ", ".join(f"{k} {n}" for k, n in r.kinds.most_common()))
    print(f"extraction {1e3 * r.elapsed_s / r.turns:.3f} ms per turn")
    if r.sources:
        print(
            f"observation source turns with a kept fact {r.covered}/{r.sources} "
            f"({100 * r.covered / r.sources:.1f} %)"
        )
    print(
        f"question evidence turns with a kept fact {r.evidence_covered}/{r.evidence} "
        f"({100 * r.evidence_covered / r.evidence:.1f} %)"
    )
    kept = r.kept
    if args.only_self:
        forms = {
            (w, f) for w, _, f in extract_all(args.data, RuleExtractor(self_statements=False)).kept
        }
        kept = [k for k in kept if (k[0], k[2]) not in forms]
    for where, text, fact in random.Random(args.seed).sample(kept, min(args.sample, len(kept))):
        print(f"- [{where}] {fact!r}  <=  {text[:140]!r}")


if __name__ == "__main__":
    main()
