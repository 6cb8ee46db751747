"""Scores of the learning benchmark (bench/locomo_learning.py): turn Recall@k through the recalled
facts' provenance with its standard error, LoCoMo's observations matched by extracted facts, and
the printed report."""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Sequence
from typing import Any

from locomo_data import CATEGORIES, Question

# Ranked facts of one question, each as the set of turns (dia_ids) it was learned from.
Ranked = list[frozenset[str]]


def covered(question: Question, ranked: Ranked, k: int) -> float:
    """Share of the question's evidence turns in the provenance of its top k facts."""
    turns: set[str] = set()
    for provenance in ranked[:k]:
        turns |= provenance
    return len(question.evidence & turns) / len(question.evidence)


def mean_se(values: Sequence[float]) -> tuple[float | None, float | None]:
    """Mean and its standard error (sample standard deviation / sqrt(n)), in percent."""
    if not values:
        return None, None
    mean = 100 * statistics.fmean(values)
    if len(values) < 2:
        return round(mean, 2), None
    return round(mean, 2), round(100 * statistics.stdev(values) / math.sqrt(len(values)), 2)


def recall_table(
    results: Sequence[tuple[Question, Ranked]], ks: Sequence[int]
) -> dict[str, dict[str, Any]]:
    """Turn Recall@k in percent with its standard error, overall and per category."""
    groups: dict[str, list[tuple[Question, Ranked]]] = {"all": list(results)}
    for cat, name in CATEGORIES.items():
        groups[f"{cat} {name}"] = [r for r in results if r[0].category == cat]
    table: dict[str, dict[str, Any]] = {}
    for group, items in groups.items():
        row: dict[str, Any] = {"questions": len(items)}
        for k in ks:
            row[f"R@{k}"], row[f"R@{k}_se"] = mean_se([covered(q, r, k) for q, r in items])
        table[group] = row
    return table


def name_free(text: str, names: Sequence[str]) -> str:
    """The observation without its speaker's name: facts are written without a subject
    ("Attended an LGBTQ support group"), LoCoMo's observations name the speaker."""
    for name in names:
        text = re.sub(rf"\b{re.escape(name)}('s)?\b", "", text)
    return re.sub(r"\s+", " ", text).strip()


def observation_table(best: Sequence[float | None], cosines: Sequence[float]) -> dict[str, Any]:
    """`best[i]`: the highest vector score of a fact learned from observation i's source turn
    (None: no fact came from that turn). Matched at cosine >= c, for each c in `cosines`."""
    n = len(best)
    out: dict[str, Any] = {
        "observations": n,
        "source_turn_has_a_fact_pct": mean_se([float(b is not None) for b in best])[0],
    }
    for c in cosines:
        share, se = mean_se([float(b is not None and b >= c) for b in best])
        out[f"matched_at_cosine_{c}_pct"] = share
        out[f"matched_at_cosine_{c}_se"] = se
    return out


def _row(group: str, row: dict[str, Any], ks: Sequence[int]) -> str:
    cells = ""
    for k in ks:
        value, se = row[f"R@{k}"], row[f"R@{k}_se"]
        cells += f"{'-':>14}" if value is None else f"{value:>8.1f} ±{se or 0:>4.1f}"
    return f"{group:<16}{row['questions']:>10}{cells}"


def print_report(report: dict[str, Any], ks: Sequence[int]) -> None:
    head = f"{'category':<16}{'questions':>10}" + "".join(f"{f'R@{k} ± se':>14}" for k in ks)
    for title, key in (
        ("learning path (StartTurn/CompleteTurn): facts and episodes, merged by score", "recall"),
        ("learning path, facts only, provenance = every version's message", "recall_facts"),
        (
            "learning path, facts only, provenance = the live version's message",
            "recall_live_version",
        ),
        ("learning path, episodes only", "recall_episodes"),
        ("AddFact per turn (bench/locomo_recall.py's ingest), same server", "recall_addfact"),
    ):
        table = report.get(key)
        if not table:
            continue
        print(f"\n{title}\n{head}\n" + "-" * len(head))
        for group, row in table.items():
            print(_row(group, row, ks))
    for key, folds in report.get("recall_at_10_by_conversation", {}).items():
        print(f"R@10 by conversation, {key}: " + ", ".join(f"{c} {v}" for c, v in folds.items()))
    learn = report["learning"]
    print(
        f"\nfed {learn['user_turns']} user turns ({learn['turn_pairs']} StartTurn/CompleteTurn "
        f"pairs) in {learn['feed_wall_s']} s; learning done {learn['wait_after_feed_s']} s later"
    )
    print(
        f"facts stored: {learn['live_facts']} live ({learn['facts_per_user_turn']} per user turn);"
        f" decisions {learn['decisions']}"
    )
    print(
        f"learning per turn (server histogram): mean {learn['learning_ms_per_turn']} ms over "
        f"{learn['learned_turns']} turns"
    )
    obs = report["observations"]
    cells = ", ".join(
        f"{key.removeprefix('matched_at_cosine_').removesuffix('_pct')}: {value}%"
        for key, value in obs.items()
        if key.endswith("_pct") and key.startswith("matched")
    )
    print(
        f"observations ({obs['observations']}): source turn has a fact "
        f"{obs['source_turn_has_a_fact_pct']}%; matched at cosine >= {cells}"
    )
    lat = report["turn_latency"]
    print(
        f"StartTurn p50 {lat['StartTurn']['p50_ms']} ms, CompleteTurn p50 "
        f"{lat['CompleteTurn']['p50_ms']} ms (while feeding, {report['meta']['feed_concurrency']}"
        " scopes at once)"
    )
    print(f"total {report['meta']['wall_s']} s")
