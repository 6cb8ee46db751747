"""LoCoMo recall, scored: turn-level Recall@k by category, what a score threshold lets through,
SearchFacts latency, and the printed report (bench/locomo_recall.py runs the questions)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from locomo_data import CATEGORIES, Question

TARGET_R10 = 65.0  # the project's target, percent, on the dev split
PROBE_TOP_K = 100  # SearchFacts' maximum


def recall_table(
    results: Sequence[tuple[Question, list[str]]], ks: Sequence[int]
) -> dict[str, dict[str, Any]]:
    """Turn-level Recall@k in percent, averaged over questions: overall and per category."""
    groups: dict[str, list[tuple[Question, list[str]]]] = {"all": list(results)}
    for cat, name in CATEGORIES.items():
        groups[f"{cat} {name}"] = [r for r in results if r[0].category == cat]
    table: dict[str, dict[str, Any]] = {}
    for group, items in groups.items():
        row: dict[str, Any] = {"questions": len(items)}
        for k in ks:
            per_question = [
                len(q.evidence & set(found[:k])) / len(q.evidence) for q, found in items
            ]
            row[f"R@{k}"] = round(100 * statistics.fmean(per_question), 2) if items else None
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


def latency_ms(latencies: Sequence[float]) -> dict[str, float]:
    ordered = sorted(latencies)

    def pct(p: float) -> float:
        return round(1000 * ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))], 2)

    return {
        "count": len(ordered),
        "mean_ms": round(1000 * statistics.fmean(ordered), 2),
        "p50_ms": pct(50),
        "p95_ms": pct(95),
        "max_ms": round(1000 * ordered[-1], 2),
    }


def print_report(report: dict[str, Any], ks: Sequence[int]) -> None:
    head = f"{'category':<16}{'questions':>10}" + "".join(f"{f'R@{k}':>8}" for k in ks)
    print("\n" + head + "\n" + "-" * len(head))
    for group, row in report["recall"].items():
        cells = "".join(
            f"{row[f'R@{k}']:>8.1f}" if row[f"R@{k}"] is not None else f"{'-':>8}" for k in ks
        )
        print(f"{group:<16}{row['questions']:>10}{cells}")
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
        f"SearchFacts latency: mean {lat['mean_ms']} ms, p50 {lat['p50_ms']}, p95 {lat['p95_ms']}"
        f" (as_of: mean {lat_as_of['mean_ms']} ms) at {report['meta']['search_concurrency']}"
        " in flight"
    )
    ing = report["ingest"]
    print(
        f"ingest: {ing['facts']} facts in {ing['wall_s']} s ({ing['facts_per_s']}/s); index "
        f"verified for all after {ing['all_verified_after_s']} s; "
        f"total {report['meta']['wall_s']} s"
    )
