"""bench/crossval.py: a constant is chosen without the conversation it is scored on, and from a
flat region rather than a lone peak (made-up scores, no LoCoMo file, no server)."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


@pytest.fixture
def crossval(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCH))
    return importlib.import_module("crossval")


def _scores(best: dict[str, float], grid: list[float]) -> dict[float, list[tuple[str, float]]]:
    """Two questions per conversation; each conversation scores 1 at its own best value and
    falls off by 0.25 a grid step."""
    return {
        v: [
            (conv, max(0.0, 1 - 0.25 * abs(grid.index(v) - grid.index(b))))
            for conv, b in best.items()
            for _ in range(2)
        ]
        for v in grid
    }


def test_each_fold_chooses_without_the_conversation_it_scores(crossval: ModuleType) -> None:
    grid = [0.0, 0.1, 0.2, 0.3, 0.4]
    # Four conversations are best at 0.1; the fifth, alone, at 0.4.
    best = {"a": 0.1, "b": 0.1, "c": 0.1, "d": 0.1, "e": 0.4}
    cv = crossval.leave_one_out(_scores(best, grid))
    by = {f.held_out: f for f in cv.folds}
    assert [f.held_out for f in cv.folds] == ["a", "b", "c", "d", "e"]
    # Fitted on a-d (not on e), the choice is 0.1, and e pays for it.
    assert by["e"].chosen == 0.1
    assert by["e"].held_out_score == pytest.approx(25.0)
    assert by["e"].held_out_range == (pytest.approx(0.0), pytest.approx(100.0))
    assert by["a"].chosen == 0.1 and by["a"].held_out_score == pytest.approx(100.0)
    # Pooled over the 10 questions: 8 at 1.0, 2 at 0.25.
    assert cv.pooled == pytest.approx(85.0)
    assert cv.fold_spread == pytest.approx(75.0)
    assert cv.agree
    assert all(f.questions == 2 for f in cv.folds)


def test_a_lone_peak_loses_to_a_plateau(crossval: ModuleType) -> None:
    grid = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5]
    # 0.1 is the highest point but stands alone; 0.3-0.5 are nearly as high, together.
    score = {0.0: 40.0, 0.1: 80.0, 0.2: 40.0, 0.3: 75.0, 0.4: 76.0, 0.5: 75.0}
    assert crossval.choose(grid, score) == 0.4


def test_disagreeing_folds_are_reported(crossval: ModuleType) -> None:
    grid = [0.0, 0.1, 0.2, 0.3, 0.4]
    # Three conversations at each end: leaving one out tips the choice to the other end.
    best = {"a": 0.0, "b": 0.0, "c": 0.0, "d": 0.4, "e": 0.4, "f": 0.4}
    cv = crossval.leave_one_out(_scores(best, grid))
    assert {f.chosen for f in cv.folds} == {0.0, 0.4}
    assert not cv.agree


def test_questions_must_line_up_across_the_grid(crossval: ModuleType) -> None:
    with pytest.raises(ValueError, match="same questions"):
        crossval.leave_one_out({0.0: [("a", 1.0), ("b", 0.0)], 0.1: [("b", 0.0), ("a", 1.0)]})
    with pytest.raises(ValueError, match="two conversations"):
        crossval.leave_one_out({0.0: [("a", 1.0)], 0.1: [("a", 0.5)]})


@pytest.fixture
def sweep(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCH))
    return importlib.import_module("crossval_sweep")


def test_the_sweep_takes_server_settings_only(
    sweep: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    args = sweep.parse_args(["--setting", "ltm_off_subject_weight", "--values", "0.9,0.7,0.9"])
    assert args.grid == [0.7, 0.9]
    with pytest.raises(SystemExit):
        sweep.parse_args(["--setting", "ltm_off_subject", "--values", "0.7,0.9"])
    assert "not a server setting: ltm_off_subject" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        sweep.parse_args(["--setting", "ltm_off_subject_weight", "--values", "0.7"])


def test_a_question_scores_its_evidence_in_the_served_top_ten(sweep: ModuleType) -> None:
    ranked = [f"D1:{i}" for i in range(1, 21)]
    assert sweep.question_r10({"evidence": ["D1:2", "D1:15"], "ranked": ranked}) == 0.5
    assert sweep.question_r10({"evidence": ["D1:10"], "ranked": ranked}) == 1.0


def test_each_run_is_served_only_unless_full_with_the_fixed_settings(sweep: ModuleType) -> None:
    base = ["--setting", "ltm_link_seeds", "--values", "3,5"]
    fixed = ["--server-arg=--ltm-second-hop-weight", "--server-arg=0.5"]
    command = sweep.bench_command(sweep.parse_args([*base, *fixed]), 3.0, Path("out.json"))
    assert command[-1] == "--served-only"
    flags = [c for c in command if c.startswith("--server-arg=")]
    assert flags == [
        "--server-arg=--ltm-link-seeds",
        "--server-arg=3",
        "--server-arg=--ltm-second-hop-weight",
        "--server-arg=0.5",
    ]
    full = sweep.bench_command(sweep.parse_args([*base, "--full"]), 5.0, Path("out.json"))
    assert "--served-only" not in full
