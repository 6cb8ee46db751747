"""What a change to the learning path's rules removes and adds: two outputs of `learned.py`
(before and after the change), compared by fact text. The facts printed are what to label by
RULES.md to measure the change itself: a paired measure, with no sampling error for the facts
that did not change.

    .venv/bin/python bench/fact_quality/learned.py --out /tmp/before.jsonl   # at the old rules
    .venv/bin/python bench/fact_quality/learned.py --out /tmp/after.jsonl    # at the new rules
    .venv/bin/python bench/fact_quality/compare.py /tmp/before.jsonl /tmp/after.jsonl
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def _facts(path: Path) -> list[str]:
    return [json.loads(line)["fact"] for line in path.read_text(encoding="utf-8").splitlines()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    args = parser.parse_args()
    before, after = _facts(args.before), _facts(args.after)
    kept_before, kept_after = set(before), set(after)
    gone = [f for f in before if f not in kept_after]
    added = [f for f in after if f not in kept_before]
    print(f"{len(before)} live facts before, {len(after)} after:", end=" ")
    print(f"{len(gone)} gone, {len(added)} new")
    for fact in gone:
        print(f"gone | {fact}")
    for fact in added:
        print(f"new  | {fact}")


if __name__ == "__main__":
    main()
