"""The offline model's rate on texts of mixed length: one text per call, batches padded to their
longest, and batches cut by length into sub-batches of at most `--budgets` padded tokens.

    .venv/bin/python bench/embed_padding.py [--data PATH] [--texts 512] [--batch 32] \
        [--budgets 64,128,256,512,1024] [--rounds 2] [--json-out bench/results/embed_padding.json]

Two sets of texts: LoCoMo turns as the recall bench stores them ("Speaker: text", 40 tokens on
average, up to ~100) and recall_texts' short facts (~14 tokens). Each set is embedded in
batches of `--batch` (the embedding pool's default) straight on `MiniLMBackend`, one thread, no
pool; `--rounds` repeats every mode in turn so that a neighbour's load hits all of them.
`padded` is one model call per batch (every text padded to the batch's longest), which is what
the backend did before `batch_tokens`; the budget rows are `MiniLMBackend(batch_tokens=B)`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import locomo_data
from recall_texts import scope_facts

from memory_server.embedding.minilm import MiniLMBackend

UNBOUNDED = 1 << 30  # one sub-batch whatever the lengths: the batch padded to its longest


def texts_of(args: argparse.Namespace) -> dict[str, list[str]]:
    conversations = locomo_data.load(args.data)
    turns = [t.memory_text for c in conversations for t in c.turns][: args.texts]
    short = [f for s in range(args.texts // 256 + 1) for f in scope_facts(s, 256)][: args.texts]
    return {"locomo turns": turns, "short facts": short}


def rate(backend: MiniLMBackend, texts: list[str], batch: int) -> float:
    began = time.perf_counter()
    for i in range(0, len(texts), batch):
        backend.embed_batch(texts[i : i + batch])
    return len(texts) / (time.perf_counter() - began)


def run(args: argparse.Namespace) -> dict[str, Any]:
    budgets = [int(b) for b in args.budgets.split(",") if b]
    modes: list[tuple[str, int, int]] = [
        ("one text per call", UNBOUNDED, 1),
        (f"batches of {args.batch}, padded", UNBOUNDED, args.batch),
        *((f"batches of {args.batch}, sub-batches ≤ {b} tokens", b, args.batch) for b in budgets),
    ]
    backends = {b: MiniLMBackend(batch_tokens=b) for b in {m[1] for m in modes}}
    sets = texts_of(args)
    for backend in backends.values():
        backend.load()
        backend.embed_batch(next(iter(sets.values()))[: args.batch])  # warm-up
    rates: dict[str, dict[str, list[float]]] = {name: {m[0]: [] for m in modes} for name in sets}
    for _ in range(args.rounds):
        for name, texts in sets.items():
            for label, budget, batch in modes:
                rates[name][label].append(rate(backends[budget], texts, batch))
    out: dict[str, Any] = {"texts": args.texts, "batch": args.batch, "sets": {}}
    for name, texts in sets.items():
        lengths = backends[UNBOUNDED].token_counts(texts)
        padded = statistics.median(rates[name][modes[1][0]])
        rows = [
            {
                "mode": label,
                "texts_per_s": round(statistics.median(rates[name][label]), 1),
                "rounds": [round(r, 1) for r in rates[name][label]],
                "vs_padded": round(statistics.median(rates[name][label]) / padded, 2),
            }
            for label, _, _ in modes
        ]
        out["sets"][name] = {
            "tokens_mean": round(statistics.mean(lengths), 1),
            "tokens_max": max(lengths),
            "rows": rows,
        }
    return out


def report(result: dict[str, Any]) -> str:
    lines = []
    for name, data in result["sets"].items():
        lines.append(
            f"\n{name}: {result['texts']} texts, {data['tokens_mean']} tokens on average, "
            f"{data['tokens_max']} at most\n"
        )
        lines.append("| mode | texts/s (median) | rounds | ÷ padded |")
        lines.append("|---|---:|---|---:|")
        for row in data["rows"]:
            rounds = ", ".join(str(r) for r in row["rounds"])
            lines.append(
                f"| {row['mode']} | {row['texts_per_s']} | {rounds} | {row['vs_padded']} |"
            )
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--data", type=Path, default=locomo_data.DEFAULT_DATA)
    p.add_argument("--texts", type=int, default=512)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--budgets", default="64,128,256,512,1024")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--json-out", type=Path, default=Path("bench/results/embed_padding.json"))
    args = p.parse_args()
    result = run(args)
    print(report(result))
    args.json_out.parent.mkdir(parents=True, exist_ok=True)
    args.json_out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
