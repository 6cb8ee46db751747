"""What the offline rule extractor keeps from LoCoMo's turns, without a server.

Each turn's text is given to the extractor as the user's words (the speaker is the user), with
the facts already kept from that speaker as the recalled texts, as the learning path does.
Prints the facts per turn, their kinds, the extraction time per turn, the share of LoCoMo's
per-session `observation` source turns from which at least one fact was kept (a proxy: the
end-to-end benchmark decides a match fact by fact), and a random sample of what was kept.

    .venv/bin/python bench/locomo_extract.py [--data PATH] [--sample 25] [--seed 1]

The data is read in place (CC BY-NC 4.0, never copied into the project).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from locomo_data import DEFAULT_DATA, canonical, load  # noqa: E402

from memory_server.memory.extract import RuleExtractor  # noqa: E402
from memory_server.memory.ports import ExtractionInput  # noqa: E402


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--sample", type=int, default=25)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    extractor = RuleExtractor()
    observed = _observation_turns(args.data)
    kept: list[tuple[str, str, str]] = []  # (dia id, turn text, fact)
    kinds: Counter[str] = Counter()
    turns = turns_with_facts = covered = sources = retractions = 0
    elapsed_s = 0.0
    for conversation in load(args.data):
        known: dict[str, list[str]] = {}
        from_turns: set[str] = set()
        for turn in conversation.turns:
            recalled = known.setdefault(turn.speaker, [])
            start = time.perf_counter()
            found = extractor.extract_sync(ExtractionInput(turn.text, "", tuple(recalled)))
            elapsed_s += time.perf_counter() - start
            turns += 1
            if found:
                turns_with_facts += 1
                from_turns.add(turn.dia_id)
            for c in found:
                kinds[c.kind.value] += 1
                retractions += c.retraction
                if not c.retraction:
                    recalled.append(c.text)
                    kept.append((f"{conversation.sample_id} {turn.dia_id}", turn.text, c.text))
        sources += len(observed.get(conversation.sample_id, set()))
        covered += len(observed.get(conversation.sample_id, set()) & from_turns)
    facts = sum(kinds.values())
    print(f"turns {turns}, facts {facts} ({facts / turns:.3f} per turn), retractions {retractions}")
    print(f"turns with a fact {turns_with_facts} ({100 * turns_with_facts / turns:.1f} %)")
    print("kinds " + ", ".join(f"{k} {n}" for k, n in kinds.most_common()))
    print(f"extraction {1e3 * elapsed_s / turns:.3f} ms per turn")
    if sources:
        print(
            f"observation source turns with a kept fact {covered}/{sources} "
            f"({100 * covered / sources:.1f} %)"
        )
    for where, text, fact in random.Random(args.seed).sample(kept, min(args.sample, len(kept))):
        print(f"- [{where}] {fact!r}  <=  {text[:140]!r}")


if __name__ == "__main__":
    main()
