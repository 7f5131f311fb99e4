"""The instruction budget (`bench/budget.py`, `bench/budget.toml`) fails an overrun of more
than its tolerance and nothing less, and the committed budget covers every operation."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from bench import budget
from bench.budget_workload import FLOOR, OPERATIONS

FIGURES = {
    "create": 4_000_000,
    "wrong_check": 2_000_000,
    "approving_check": 2_300_000,
    "retrieve": 1_000_000,
    "list": 3_700_000,
    "message": 3_900_000,
}


def fabricated(tmp_path: Path) -> Path:
    """A budget file like the committed one, with round figures."""
    path = tmp_path / "budget.toml"
    shutil.copy(budget.BUDGET, path)
    budget.write(path, {name: float(value) for name, value in FIGURES.items()}, "abc1234", "x")
    return path


def counted(**over: float) -> dict[str, float]:
    """Every operation at its fabricated budget, the named ones at that many times it."""
    found = {name: FIGURES[name] * over.get(name, 1.0) for name in FIGURES}
    return {**found, "floor_create": 600_000.0, "floor_check": 280_000.0}


def test_an_operation_over_its_budget_by_more_than_the_tolerance_fails(tmp_path: Path) -> None:
    loaded = budget.load(fabricated(tmp_path))

    failures = budget.verdict(budget.rows(loaded, counted(wrong_check=1.021)), loaded.tolerance)

    assert len(failures) == 1
    assert failures[0].startswith("wrong_check: 2,042,000 instructions per op")
    assert "by 2.1% (more than 2%)" in failures[0]


def test_an_operation_within_the_tolerance_passes_and_a_cheaper_one_too(tmp_path: Path) -> None:
    loaded = budget.load(fabricated(tmp_path))

    found = budget.rows(loaded, counted(create=1.019, retrieve=0.5))

    assert budget.verdict(found, loaded.tolerance) == []


def test_an_operation_counted_without_a_budget_or_budgeted_but_not_counted_fails(
    tmp_path: Path,
) -> None:
    loaded = budget.load(fabricated(tmp_path))
    found = counted()
    del found["list"]
    found["cancel"] = 1_000.0

    failures = budget.verdict(budget.rows(loaded, found), loaded.tolerance)

    assert failures == [
        "list: budgeted but not counted",
        "cancel: counted but has no budget in bench/budget.toml",
    ]


def test_the_command_exits_non_zero_on_an_overrun_and_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = fabricated(tmp_path)
    monkeypatch.setattr(budget, "count", lambda *_: counted(message=1.05))
    monkeypatch.setattr("sys.argv", ["budget.py", "--budget", str(path)])

    with pytest.raises(SystemExit) as exited:
        budget.main()

    assert exited.value.code == 1
    printed = capsys.readouterr()
    assert "| message | 4,095,000 | 3,900,000 | 1.050 | — | — |" in printed.out
    assert "| create | 4,000,000 | 4,000,000 | 1.000 | 600,000 | 6.7 |" in printed.out
    assert "OVER BUDGET message: 4,095,000 instructions per op" in printed.err


def test_the_command_passes_when_every_operation_is_within_its_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(budget, "count", lambda *_: counted(create=1.01))
    monkeypatch.setattr("sys.argv", ["budget.py", "--budget", str(fabricated(tmp_path))])

    budget.main()

    assert "every operation within its budget (tolerance 2%)" in capsys.readouterr().out


def test_writing_a_count_sets_each_budget_rounded_up_and_keeps_the_comments(
    tmp_path: Path,
) -> None:
    path = fabricated(tmp_path)
    comments = [line for line in path.read_text().splitlines() if line.startswith("#")]

    raised = budget.write(path, {**counted(), "create": 4_012_345.6}, "def5678", "2030-01-02")

    loaded = budget.load(path)
    assert raised == ["create"]
    assert loaded.entries["create"] == budget.Entry(4_020_000, "def5678", "2030-01-02")
    assert loaded.entries["retrieve"] == budget.Entry(1_000_000, "def5678", "2030-01-02")
    assert [line for line in path.read_text().splitlines() if line.startswith("#")] == comments


def test_a_budget_is_rounded_up_by_at_most_one_percent() -> None:
    for value in (999_001.0, 1_000_001.0, 1_009_999.0, 2_067_490.0, 4_047_340.5, 87_654.0):
        rounded = budget.rounded_up(value)
        assert value <= rounded <= value * 1.01, value
    assert budget.rounded_up(2_067_490.0) == 2_070_000


def test_the_committed_budget_holds_every_operation_with_its_commit_and_date() -> None:
    loaded = budget.load(budget.BUDGET)

    assert set(loaded.entries) == set(OPERATIONS)
    assert loaded.tolerance == 0.02
    for name, entry in loaded.entries.items():
        assert entry.instructions > 100_000, name
        assert re.fullmatch(r"[0-9a-f]{7,40}", entry.commit), name
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", entry.date), name
    text = budget.BUDGET.read_text()
    for target in ("2.0 M", "1.1 M", "1.2 M"):
        assert f"Target: {target}" in text


def test_the_counted_workload_runs_every_operation_through_the_real_app() -> None:
    """What `make budget` counts, run briefly without valgrind: every phase's requests
    answer as the workload expects (a wrong code leaves the verification pending, the
    right one approves it, the page holds the newest)."""
    done = subprocess.run(
        [sys.executable, str(budget.WORKLOAD), "--calls", "3", "--warmup", "2"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert done.returncode == 0, done.stderr[-3000:]
    printed = done.stdout.splitlines()
    assert printed == [f"{name}: 2 warm-up, 3 counted" for name in (*OPERATIONS, *FLOOR)]
