"""A linear probe on a fact's MiniLM vector that tells a good fact from small talk and vague ones
(RULES.md, "The probe"): trained on the labelled dev facts, chosen and measured by
leave-one-conversation-out, written for the server to load.

    .venv/bin/python bench/fact_quality/probe.py [--l2 1,3,10] [--keep-at 0.3,0.35,0.4,0.45]
                                                  [--judge statements|statements+forms] [--write]

Training set: every labelled fact (`census.jsonl`, `labelled.jsonl`, `after_labelled.jsonl`;
one label per text, the census's first), good against any other label, as MiniLM vectors; a
restatement by the label its words have alone (the census's `otherwise`), or left out.
Model: L2-regularised logistic regression, fitted by Newton's method (numpy; 384 weights and a
bias). Measure: the facts `learned.py` keeps now, by the census; for each dev conversation the
probe is fitted on the other four and judges the held-out conversation's facts (`--judge`:
only the self statements, or also the rule forms' preferences and goals), which it keeps when
its probability of good is >= keep-at. Printed per (l2, keep-at), scored by the census
(census.py): each fold's good share, restatement share and good facts lost, and all five
pooled. `--write` fits on all five with the first l2 and keep-at
given and writes `memory/facts/probe_minilm.json`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import census
import numpy as np
import numpy.typing as npt
from learned import Learned, learn_all
from locomo_data import DEFAULT_DATA

from memory_server.embedding.minilm import MiniLMBackend
from memory_server.memory.facts.model import FactKind
from memory_server.memory.facts.probe import JUDGED_FORMS

HERE = Path(__file__).resolve().parent
SOURCES = ("census.jsonl", "labelled.jsonl", "after_labelled.jsonl")
OUT = HERE.parent.parent / "server/memory_server/memory/facts/probe_minilm.json"
Vectors = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Labelled:
    fact: str
    conversation: str
    good: bool


def labelled() -> list[Labelled]:
    """Every labelled fact once (the first source's label wins). A restatement is judged by
    its words alone, as the probe is: the census's `otherwise` label, and none elsewhere (the
    reconciler, not the probe, tells a restatement)."""
    seen: dict[str, Labelled | None] = {}
    for name in SOURCES:
        for line in (HERE / name).read_text(encoding="utf-8").splitlines():
            item = json.loads(line)
            fact = str(item["fact"])
            if fact in seen:
                continue
            label = str(item["label"])
            if label == "restatement":
                label = str(item.get("otherwise", ""))
            where = str(item["conversation"])
            seen[fact] = Labelled(fact, where, label == "good") if label else None
    return [item for item in seen.values() if item is not None]


def fit(x: Vectors, y: Vectors, l2: float, steps: int = 25) -> tuple[Vectors, float]:
    """Logistic regression with an L2 penalty on the weights (not the bias), by Newton."""
    n, d = x.shape
    xb = np.hstack([x, np.ones((n, 1))])
    w = np.zeros(d + 1)
    penalty = np.full(d + 1, l2)
    penalty[-1] = 0.0
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(xb @ w)))
        grad = xb.T @ (p - y) + penalty * w
        hess = (xb * (p * (1 - p))[:, None]).T @ xb + np.diag(penalty)
        w -= np.linalg.solve(hess, grad)
    return w[:-1], float(w[-1])


def judged(fact: Learned, scope: str) -> bool:
    """Whether the probe judges this fact: self statements, or also preferences and goals."""
    forms = scope == "statements+forms" and FactKind(fact["kind"]) in JUDGED_FORMS
    return fact["self_statement"] or forms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--l2", default="1,3,10")
    parser.add_argument("--keep-at", default="0.3,0.35,0.4,0.45,0.5")
    parser.add_argument(
        "--judge", choices=("statements", "statements+forms"), default="statements+forms"
    )
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    l2s = [float(v) for v in args.l2.split(",")]
    cuts = [float(v) for v in args.keep_at.split(",")]
    items = labelled()
    backend = MiniLMBackend()
    backend.load()
    learned = asyncio.run(learn_all(args.data, probe=False))
    texts = list(dict.fromkeys([i.fact for i in items] + [f["fact"] for f in learned]))
    vectors = dict(zip(texts, np.array(backend.embed_batch(texts), dtype=np.float64), strict=True))
    x = np.array([vectors[i.fact] for i in items])
    y = np.array([float(i.good) for i in items])
    where = np.array([i.conversation for i in items])
    conversations = sorted({f["conversation"] for f in learned})
    print(f"{len(items)} labelled facts; {len(learned)} learned now, judged: {args.judge}")
    known = census.labels()
    before = census.tally(learned, known)
    judged_here = [judged(fact, args.judge) for fact in learned]
    for l2 in l2s:
        models = {c: fit(x[where != c], y[where != c], l2) for c in conversations}
        # Each fact's probability of good by the probe fitted without its conversation.
        held_out = [_good(vectors[f["fact"]], *models[f["conversation"]]) for f in learned]
        for cut in cuts:
            kept = [
                fact
                for fact, p, judge in zip(learned, held_out, judged_here, strict=True)
                if not (judge and p < cut)
            ]
            _report(l2, cut, before, census.tally(kept, known))
    if args.write:
        w, b = fit(x, y, l2s[0])
        OUT.write_text(
            json.dumps(
                {
                    "model": backend.model_name,
                    "dimension": len(w),
                    "keep_at": cuts[0],
                    "l2": l2s[0],
                    "trained_on": f"{len(items)} labelled LoCoMo dev facts "
                    "(bench/fact_quality/probe.py)",
                    "bias": round(b, 6),
                    "weights": [round(float(v), 6) for v in w],
                }
            )
            + "\n",
            encoding="utf-8",
        )
        print(f"wrote {OUT}")


def _good(vector: Vectors, w: Vectors, b: float) -> float:
    return float(1.0 / (1.0 + np.exp(-(float(vector @ w) + b))))


def _report(
    l2: float, cut: float, before: dict[str, Counter[str]], after: dict[str, Counter[str]]
) -> None:
    """The census's counts of what the held-out probes kept (census.py: a restatement of a
    fact no longer kept counts as its other label), per fold and pooled."""
    folds = []
    for conversation in sorted(after):
        good, restated, n = census.shares([after[conversation]])
        lost = before[conversation]["good"] - after[conversation]["good"]
        folds.append(f"{conversation} {100 * good:.1f} % / {100 * restated:.1f} % / {lost}")
    good, restated, n = census.shares(after.values())
    lost = sum(c["good"] for c in before.values()) - sum(c["good"] for c in after.values())
    print(
        f"l2 {l2:g} keep-at {cut:.2f}: {n} kept, {100 * good:.1f} % good, "
        f"{100 * restated:.1f} % restatements, {lost} good lost | " + ", ".join(folds)
    )


if __name__ == "__main__":
    main()
