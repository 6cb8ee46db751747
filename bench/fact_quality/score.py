"""The fact quality rules (RULES.md) on the labelled set: what the learning path's checks keep.

Each labelled fact goes through what the rule extractor now does with a self statement: tidied
to one claim and judged by the quality rules (memory/learning/quality.py), then compared with the
live facts of its scope it is closest to (`earlier`: up to three learned before it, MiniLM cosine
>= 0.6) by `Recalled.restates` (memory/facts/restated.py). Printed per split and label: kept or
dropped, and among what is kept the share labelled good and the share labelled a restatement.

    .venv/bin/python bench/fact_quality/score.py [--show]

The labels are a reader's, by RULES.md, of facts the offline path learned on LoCoMo's dev split
before these rules (`learned.py` at 193674d); "tune" is the part the rules were written against,
"check" a second sample labelled before the rules were run on it. `after_labelled.jsonl` is a
random sample of what the path learns with the rules (`learned.py`), labelled the same way
without looking at what the rules said of it: its shares are the measure of the rules.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from memory_server.memory.facts.restated import Recalled
from memory_server.memory.learning.quality import tidy, verdict

LABELLED = Path(__file__).resolve().parent / "labelled.jsonl"
AFTER = Path(__file__).resolve().parent / "after_labelled.jsonl"


@dataclass
class Score:
    kept: Counter[str] = field(default_factory=Counter)  # label -> kept
    dropped: Counter[str] = field(default_factory=Counter)  # label -> dropped

    @property
    def total_kept(self) -> int:
        return sum(self.kept.values())

    def share_kept(self, label: str) -> float:
        return self.kept[label] / self.total_kept if self.total_kept else 0.0

    def share_dropped(self, label: str) -> float:
        n = self.kept[label] + self.dropped[label]
        return self.dropped[label] / n if n else 0.0


def load(path: Path = LABELLED) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def judged(item: dict[str, object]) -> tuple[bool, str]:
    """(kept, why): what the learning path's checks do with a labelled fact."""
    text = tidy(str(item["fact"]))
    if (broken := verdict(text)) is not None:
        return False, broken.value
    earlier = item.get("earlier") or []
    assert isinstance(earlier, list)
    if Recalled([str(e) for e in earlier]).restates(text):
        return False, "R6"
    return True, ""


def score(items: list[dict[str, object]], split: str | None = None) -> Score:
    out = Score()
    for item in items:
        if split is not None and item["split"] != split:
            continue
        kept, _ = judged(item)
        (out.kept if kept else out.dropped)[str(item["label"])] += 1
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--show", action="store_true", help="print every disagreement")
    args = parser.parse_args()
    items = load()
    for split in ("tune", "check", None):
        s = score(items, split)
        print(f"{split or 'all'}: kept {s.total_kept}")
        for label in sorted(set(s.kept) | set(s.dropped)):
            print(f"  {label:12} kept {s.kept[label]:4}  dropped {s.dropped[label]:4}")
        print(
            f"  good among kept {100 * s.share_kept('good'):.1f} %, restatements among kept "
            f"{100 * s.share_kept('restatement'):.1f} %, good dropped "
            f"{100 * s.share_dropped('good'):.1f} %"
        )
    after = Counter(str(item["label"]) for item in load(AFTER))
    n = sum(after.values())
    print(
        f"learned with the rules, labelled sample of {n}: good {100 * after['good'] / n:.1f} %, "
        f"restatements {100 * after['restatement'] / n:.1f} % ({dict(after)})"
    )
    if args.show:
        for item in items:
            kept, why = judged(item)
            if kept != (item["label"] == "good"):
                print(f"{item['label']:12} {why or 'kept':4} {item['fact']}")


if __name__ == "__main__":
    main()
