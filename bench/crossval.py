"""Leave-one-conversation-out cross-validation of a constant chosen by a sweep.

A constant tuned on every dev conversation scores well on dev and worse on conversations it
never saw (issue 30: temporal R@10 86-88 on dev, 72.9 held out). Here each conversation is held
out in turn: the constant is chosen on the other conversations' questions alone and scored on
the held-out one. The pooled held-out score, over every question at its fold's choice, is what
a new conversation can expect; the choices of the folds show whether the constant sits in a
flat region (they agree) or on a peak one conversation made (they do not).

A value is chosen by the worst training score among itself and its grid neighbours (one either
side), so a lone peak between two low values loses to a plateau: constants come from flat
regions.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# Per grid value, each question's score in [0, 1] with the conversation it belongs to, in the
# same question order for every value.
Scores = Mapping[float, Sequence[tuple[str, float]]]


@dataclass(frozen=True)
class Fold:
    held_out: str
    questions: int
    chosen: float
    fitted: float  # the training questions' mean at `chosen`, percent
    held_out_score: float  # the held-out questions' mean at `chosen`, percent
    held_out_range: tuple[float, float]  # the held-out mean's lowest and highest over the grid


@dataclass(frozen=True)
class CrossValidation:
    folds: list[Fold]
    pooled: float  # every question at its fold's choice, percent
    pooled_se: float  # its standard error over questions
    fold_spread: float  # highest minus lowest fold score, percent
    agree: bool  # every fold chose the same value or a grid neighbour of it


def _mean(values: Sequence[float]) -> float:
    return 100 * statistics.fmean(values) if values else 0.0


def choose(grid: Sequence[float], score: Mapping[float, float]) -> float:
    """The grid value whose worst score among itself and its grid neighbours is highest; among
    equals, the one scoring highest itself, then the smaller value."""
    ordered = sorted(grid)

    def key(i: int) -> tuple[float, float, float]:
        window = ordered[max(0, i - 1) : i + 2]
        return (min(score[v] for v in window), score[ordered[i]], -ordered[i])

    return ordered[max(range(len(ordered)), key=key)]


def leave_one_out(scores: Scores) -> CrossValidation:
    grid = sorted(scores)
    if not grid:
        raise ValueError("no grid values")
    order = [c for c, _ in scores[grid[0]]]
    if any([c for c, _ in scores[v]] != order for v in grid):
        raise ValueError("every grid value needs the same questions in the same order")
    conversations = list(dict.fromkeys(order))
    if len(conversations) < 2:
        raise ValueError("cross-validation needs at least two conversations")
    folds: list[Fold] = []
    held_out_all: list[float] = []
    for held in conversations:
        train = {v: [s for c, s in scores[v] if c != held] for v in grid}
        test = {v: [s for c, s in scores[v] if c == held] for v in grid}
        chosen = choose(grid, {v: _mean(train[v]) for v in grid})
        held_means = [_mean(test[v]) for v in grid]
        folds.append(
            Fold(
                held_out=held,
                questions=len(test[chosen]),
                chosen=chosen,
                fitted=_mean(train[chosen]),
                held_out_score=_mean(test[chosen]),
                held_out_range=(min(held_means), max(held_means)),
            )
        )
        held_out_all.extend(test[chosen])
    n = len(held_out_all)
    se = 100 * statistics.stdev(held_out_all) / math.sqrt(n) if n > 1 else 0.0
    steps = sorted({grid.index(f.chosen) for f in folds})
    fold_scores = [f.held_out_score for f in folds]
    return CrossValidation(
        folds=folds,
        pooled=_mean(held_out_all),
        pooled_se=se,
        fold_spread=max(fold_scores) - min(fold_scores),
        agree=steps[-1] - steps[0] <= 1,
    )


def print_folds(name: str, cv: Mapping[str, Any], current: float | None = None) -> None:
    """One line per fold, then the pooled held-out score: the table bench/README quotes, from
    a report's `dataclasses.asdict` of a CrossValidation."""
    note = f" (the server's default: {current:g})" if current is not None else ""
    print(f"\nleave-one-conversation-out: {name}{note}")
    head = f"{'held out':<12}{'questions':>10}{'chosen':>9}{'fitted':>9}{'held out':>10}"
    print(head + f"{'grid low-high':>16}\n" + "-" * (len(head) + 16))
    for f in cv["folds"]:
        low, high = f["held_out_range"]
        print(
            f"{f['held_out']:<12}{f['questions']:>10}{f['chosen']:>9g}{f['fitted']:>9.1f}"
            f"{f['held_out_score']:>10.1f}{low:>9.1f}-{high:<6.1f}"
        )
    print(
        f"pooled held-out {cv['pooled']:.1f} ±{cv['pooled_se']:.1f}, "
        f"folds spread {cv['fold_spread']:.1f}, "
        f"choices {'agree (flat)' if cv['agree'] else 'disagree: no flat region'}"
    )
