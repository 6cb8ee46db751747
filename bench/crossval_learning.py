"""Leave-one-conversation-out cross-validation of a server setting on the learning path (facts
and episodes merged, bench/locomo_learning.py): one run per value, each question's turn R@10
with its conversation, the folds of bench/crossval.py.

    .venv/bin/python bench/crossval_learning.py --setting ltm_neighbour_decay \\
        --values 0.5,0.75,0.9 [--reuse VALUE=report.json ...] [--json-out PATH]

Each run is a full learning-path run (4 to 11 minutes on the dev split). `--reuse` takes a
report already made with that value (its `recall_at_10_per_question`) instead of a run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from crossval import leave_one_out, print_folds
from reporting import write_report

HERE = Path(__file__).resolve().parent


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--setting", required=True, help="a server setting, e.g. ltm_neighbour_decay")
    p.add_argument("--values", required=True, help="comma-separated grid")
    p.add_argument("--reuse", action="append", default=[], help="VALUE=report.json")
    p.add_argument("--current", type=float, default=None, help="the default, for the print")
    p.add_argument("--runs-dir", type=Path, default=Path("bench/results/crossval_learning"))
    p.add_argument("--json-out", type=Path, default=Path("bench/results/crossval_learning.json"))
    return p.parse_args(argv)


def run(setting: str, value: float, out: Path) -> dict[str, Any]:
    flag = f"--{setting.replace('_', '-')}={value:g}"
    command = [sys.executable, str(HERE / "locomo_learning.py"), "--no-addfact"]
    command += ["--json-out", str(out), f"--server-arg={flag}"]
    print(f"{setting}={value:g}: {' '.join(command)}", file=sys.stderr, flush=True)
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    report: dict[str, Any] = json.loads(out.read_text())
    return report


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    grid = [float(v) for v in args.values.split(",") if v.strip()]
    reused = {float(v): Path(p) for v, p in (r.split("=", 1) for r in args.reuse)}
    args.runs_dir.mkdir(parents=True, exist_ok=True)
    reports: dict[float, dict[str, Any]] = {}
    for value in grid:
        if value in reused:
            reports[value] = json.loads(reused[value].read_text())
        else:
            reports[value] = run(
                args.setting, value, args.runs_dir / f"{args.setting}-{value:g}.json"
            )
    scores = {
        value: [(c, float(s)) for c, s in report["recall_at_10_per_question"]]
        for value, report in reports.items()
    }
    cv = asdict(leave_one_out(scores))
    print_folds(f"{args.setting} (learning path, facts and episodes)", cv, args.current)
    for value, report in reports.items():
        print(f"  {args.setting}={value:g}: R@10 by conversation "
              f"{report['recall_at_10_by_conversation']['recall']}")  # fmt: skip
    write_report(
        args.json_out,
        {
            "setting": args.setting,
            "grid": grid,
            "cross_validation": cv,
            "by_value": {
                f"{v:g}": {"recall": r["recall"]["all"], "meta": r["meta"]}
                for v, r in reports.items()
            },
        },
    )


if __name__ == "__main__":
    main()
