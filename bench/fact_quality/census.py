"""What share of what the learning path keeps is good, by the census of its learned facts.

`census.jsonl` labels, by RULES.md, every fact `learned.py` kept live at 3079a46 (787) and the
facts later changes added (`source` "added"). A run of `learned.py` is scored by fact text: the
share labelled good and the share labelled a restatement, overall and per conversation; a fact
the census does not hold is listed, to be labelled (and appended) before the figure is quoted.

    .venv/bin/python bench/fact_quality/census.py score /tmp/learned_facts.jsonl
    .venv/bin/python bench/fact_quality/census.py folds [--restated-at 0.64,0.66,...]

`folds` learns the dev split once per reconciler cut-off (`restated_at`) and chooses the cut-off
by leave-one-conversation-out: fit on four conversations (the largest good share less
restatement share; ties to the higher cut-off, which drops fewer facts), score the fifth, for
each fold. Every cut-off's score on each four is printed, so the flat region can be read off.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from learned import Learned, learn_all
from locomo_data import DEFAULT_DATA

CENSUS = Path(__file__).resolve().parent / "census.jsonl"
DEFAULT_CUTS = "0.64,0.66,0.68,0.70,0.72,0.74,0.92"


@dataclass(frozen=True)
class Label:
    label: str
    # A restatement's: the facts it says again, and its label when none of them is live.
    restates: tuple[str, ...] = ()
    otherwise: str = ""


def labels() -> dict[str, Label]:
    """Fact text -> label, from the census."""
    out: dict[str, Label] = {}
    for line in CENSUS.read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        restates = tuple(str(t) for t in item.get("restates", ()))
        out[str(item["fact"])] = Label(str(item["label"]), restates, str(item.get("otherwise", "")))
    return out


def tally(facts: Sequence[Learned], known: dict[str, Label]) -> dict[str, Counter[str]]:
    """Per conversation, the census labels of `facts` ("?" for one it does not hold). A
    restatement is one only while a fact it says again is live in its scope: else it counts
    as its `otherwise` label (it says again what is no longer kept)."""
    live = {(f["conversation"], f["speaker"], f["fact"]) for f in facts}
    out: dict[str, Counter[str]] = {}
    for fact in facts:
        found = known.get(fact["fact"])
        label = "?" if found is None else found.label
        if found is not None and found.restates:
            scope = (fact["conversation"], fact["speaker"])
            if not any((*scope, text) in live for text in found.restates):
                label = found.otherwise
        out.setdefault(fact["conversation"], Counter())[label] += 1
    return out


def shares(counts: Iterable[Counter[str]]) -> tuple[float, float, int]:
    """(good share, restatement share, facts) over the conversations' counts together."""
    total: Counter[str] = Counter()
    for c in counts:
        total.update(c)
    n = sum(total.values())
    return (total["good"] / n, total["restatement"] / n, n) if n else (0.0, 0.0, 0)


def _read(path: Path) -> list[Learned]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def score(path: Path) -> None:
    known = labels()
    facts = _read(path)
    per = tally(facts, known)
    good, restated, n = shares(per.values())
    print(f"{n} live facts: good {100 * good:.1f} %, restatements {100 * restated:.1f} %")
    for conversation, counts in sorted(per.items()):
        g, r, m = shares([counts])
        print(f"  {conversation}: {m:4d} facts, good {100 * g:.1f} %, restatements {100 * r:.1f} %")
    unknown = [f["fact"] for f in facts if f["fact"] not in known]
    for text in unknown:
        print(f"  not in the census: {text}")


def folds(cuts: Sequence[float], data: Path) -> None:
    known = labels()
    per_cut = {cut: tally(asyncio.run(learn_all(data, restated_at=cut)), known) for cut in cuts}
    conversations = sorted(next(iter(per_cut.values())))
    for held_out in conversations:
        fit = [c for c in conversations if c != held_out]
        fitted = {cut: _objective(per_cut[cut], fit) for cut in cuts}
        chosen = max(cuts, key=lambda cut: (round(fitted[cut], 3), cut))
        good, restated, n = shares([per_cut[chosen][held_out]])
        curve = ", ".join(f"{cut:.2f}: {value:.3f}" for cut, value in fitted.items())
        print(
            f"{held_out}: fit on the other four [{curve}] -> {chosen:.2f}; held out: "
            f"{n} facts, good {100 * good:.1f} %, restatements {100 * restated:.1f} %"
        )


def _objective(per: dict[str, Counter[str]], conversations: Sequence[str]) -> float:
    good, restated, _ = shares(per[c] for c in conversations)
    return good - restated


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    scored = sub.add_parser("score", help="score one learned.py output")
    scored.add_argument("learned", type=Path)
    folded = sub.add_parser("folds", help="choose restated_at by leave-one-conversation-out")
    folded.add_argument("--restated-at", default=DEFAULT_CUTS)
    folded.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args()
    if args.command == "score":
        score(args.learned)
    else:
        folds([float(c) for c in args.restated_at.split(",")], args.data)


if __name__ == "__main__":
    main()
