"""LoCoMo recall, scored: turn-level Recall@k by category, what a score threshold lets through,
SearchFacts latency, and the printed report (bench/locomo_recall.py runs the questions)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from typing import Any, TypeVar

from locomo_data import CATEGORIES, Question
from rpc import PROBE_TOP_K

TARGET_R10 = 75.0  # issue 15's target, percent, on the dev split
T = TypeVar("T")


def _groups(results: Sequence[tuple[Question, T]]) -> dict[str, list[tuple[Question, T]]]:
    groups: dict[str, list[tuple[Question, T]]] = {"all": list(results)}
    for cat, name in CATEGORIES.items():
        groups[f"{cat} {name}"] = [r for r in results if r[0].category == cat]
    return groups


def recall_at(evidence: AbstractSet[str], found: Sequence[str], k: int) -> float:
    """The share of the evidence turns in the top k, in [0, 1]."""
    return len(evidence & set(found[:k])) / len(evidence)


def question_recall(question: Question, found: Sequence[str], k: int) -> float:
    """The share of the question's evidence turns in the top k, in [0, 1]."""
    return recall_at(question.evidence, found, k)


def _mean_se(values: Sequence[float]) -> tuple[float | None, float | None]:
    """Mean and its standard error (sample sd / sqrt(n)), in percent."""
    if not values:
        return None, None
    mean = statistics.fmean(values)
    se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else 0.0
    return round(100 * mean, 2), round(100 * se, 2)


def recall_table(
    results: Sequence[tuple[Question, list[str]]], ks: Sequence[int]
) -> dict[str, dict[str, Any]]:
    """Turn-level Recall@k in percent, averaged over questions, with its standard error:
    overall and per category."""
    table: dict[str, dict[str, Any]] = {}
    for group, items in _groups(results).items():
        row: dict[str, Any] = {"questions": len(items)}
        for k in ks:
            row[f"R@{k}"], row[f"SE@{k}"] = _mean_se(
                [question_recall(q, found, k) for q, found in items]
            )
        table[group] = row
    return table


def paired_table(
    new: Sequence[tuple[Question, list[str]]],
    base: Sequence[tuple[Question, list[str]]],
    ks: Sequence[int],
) -> dict[str, dict[str, Any]]:
    """new - base on the same questions: the mean per-question difference of Recall@k and its
    standard error (paired), overall and per category, in points."""
    pairs = [(q, (f, g)) for (q, f), (p, g) in zip(new, base, strict=True) if q is p]
    if len(pairs) != len(new):
        raise ValueError("paired runs must ask the same questions in the same order")
    table: dict[str, dict[str, Any]] = {}
    for group, items in _groups(pairs).items():
        row: dict[str, Any] = {"questions": len(items)}
        for k in ks:
            diffs = [question_recall(q, f, k) - question_recall(q, g, k) for q, (f, g) in items]
            row[f"d@{k}"], row[f"SE@{k}"] = _mean_se(diffs)
            row[f"better@{k}"] = sum(d > 0 for d in diffs)
            row[f"worse@{k}"] = sum(d < 0 for d in diffs)
        table[group] = row
    return table


def threshold_table(
    results: Sequence[tuple[Question, list[str]]], threshold: float
) -> dict[str, Any]:
    """What a score threshold lets through (top_k 100, i.e. every fused candidate): the share
    of evidence turns at or above it, and the unrelated facts per question at or above it."""
    evidence = sum(len(q.evidence) for q, _ in results)
    kept = sum(len(q.evidence & set(found)) for q, found in results)
    others = sum(len(set(found) - q.evidence) for q, found in results)
    return {
        "threshold": threshold,
        "top_k": PROBE_TOP_K,
        "evidence_kept_pct": round(100 * kept / evidence, 1),
        "unrelated_per_question": round(others / len(results), 2),
    }


def _recall_rows(title: str, table: dict[str, dict[str, Any]], ks: Sequence[int]) -> None:
    head = f"{title:<16}{'questions':>10}" + "".join(f"{f'R@{k} ±SE':>14}" for k in ks)
    print("\n" + head + "\n" + "-" * len(head))
    for group, row in table.items():
        cells = "".join(
            f"{row[f'R@{k}']:>8.1f} ±{row[f'SE@{k}']:>4.1f}"
            if row[f"R@{k}"] is not None
            else f"{'-':>14}"
            for k in ks
        )
        print(f"{group:<16}{row['questions']:>10}{cells}")


def print_served(report: dict[str, Any], ks: Sequence[int]) -> None:
    """The report of a --served-only run (bench/locomo_recall.py)."""
    _recall_rows("reference setup (served)", report["recall"], ks)
    lat, ing = report["search_latency"], report["ingest"]
    print(
        f"SearchFacts latency (top_k {PROBE_TOP_K}): mean {lat['mean_ms']} ms, p50 "
        f"{lat['p50_ms']}, p95 {lat['p95_ms']} at {report['meta']['search_concurrency']} in "
        f"flight; ingest {ing['facts']} facts in {ing['wall_s']} s, total "
        f"{report['meta']['wall_s']} s"
    )


def print_report(report: dict[str, Any], ks: Sequence[int]) -> None:
    _recall_rows("reference setup", report["recall"], ks)
    _recall_rows("before", report["recall_before"], ks)
    _recall_rows("captions, w=0", report["recall_captions_only"], ks)
    head = f"{'new - before':<16}{'questions':>10}" + "".join(f"{f'd@{k} ±SE':>14}" for k in ks)
    print("\n" + head + "\n" + "-" * len(head))
    for group, row in report["paired_vs_before"].items():
        cells = "".join(
            f"{row[f'd@{k}']:>+8.1f} ±{row[f'SE@{k}']:>4.1f}"
            if row[f"d@{k}"] is not None
            else f"{'-':>14}"
            for k in ks
        )
        print(f"{group:<16}{row['questions']:>10}{cells}")
    sweep = report["sweep_time_intent_weight"]
    groups = list(next(iter(sweep.values())))
    print("\nR@10 by time-intent weight (replayed on the reference setup's candidates)")
    print(f"{'weight':<8}" + "".join(f"{g[:14]:>16}" for g in groups))
    for weight, table in sweep.items():
        print(f"{weight:<8}" + "".join(f"{table[g]['R@10']:>16.1f}" for g in groups))
    if "replay_check" in report:
        rc = report["replay_check"]
        print(f"replay at the server's weight {rc['weight']}: {rc['rankings_differ']} differ")
    print(
        f"time-intent questions {report['time_intent_questions']}, naming a date "
        f"{report['questions_naming_a_date']}; dated facts are "
        f"{report['dated_share_of_candidates_pct']}% of the candidates"
    )
    check = report["as_of_check"]
    print(
        f"\nR@10 unfiltered {check['R@10']:.2f}, with as_of (all evidence kept) "
        f"{check['R@10_as_of']:.2f}: {'match' if check['match'] else 'MISMATCH'} "
        f"({check['questions_with_different_ranking']} rankings differ)"
    )
    thr = report["threshold_check"]
    print(
        f"threshold {thr['threshold']}: keeps {thr['evidence_kept_pct']}% of evidence turns and "
        f"{thr['unrelated_per_question']} unrelated facts per question"
    )
    r10 = check["R@10"]
    print(f"target R@10 >= {TARGET_R10}: {'met' if r10 >= TARGET_R10 else 'missed'}")
    lat, lat_as_of = report["search_latency"], report["search_latency_as_of"]
    print(
        f"SearchFacts latency (top_k {PROBE_TOP_K}): mean {lat['mean_ms']} ms, p50 "
        f"{lat['p50_ms']}, p95 {lat['p95_ms']} (as_of: mean {lat_as_of['mean_ms']} ms) at "
        f"{report['meta']['search_concurrency']} in flight"
    )
    ing = report["ingest"]
    print(
        f"ingest: {ing['facts']} facts ({len(ing['setups'])} setups) in {ing['wall_s']} s "
        f"({ing['facts_per_s']}/s); index verified for all after "
        f"{ing['all_verified_after_s']} s; total {report['meta']['wall_s']} s"
    )
