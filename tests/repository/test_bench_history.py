"""`make bench` over time: bench/trend.py renders a history, and the committed one holds."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "bench" / "results" / "history.jsonl"


def load_trend() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_trend", ROOT / "bench" / "trend.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


trend = load_trend()

OLDER = {
    "date": "2026-11-25T19:05:00Z",
    "commit": "5dfed9c",
    "source": "docs",
    "machine": {"cores": 2, "load_average": [0.5]},
    "sqlite_create_ratio": 0.37,
    "send_api_msgs_per_s": 691.4,
}
NEWER = {
    "date": "2026-11-26T01:45:00Z",
    "commit": "e8370fe-dirty",
    "source": "make bench",
    "machine": {"cores": 2, "load_average": [0.61, 0.4, 0.3]},
    "sqlite_create_ratio": 0.3912,
    "pg_create_p99_ms": 17.34,
    "errors": {},
}


def write_history(path: Path) -> Path:
    # Newest first on purpose: the table must come out oldest first whatever the file order.
    path.write_text(json.dumps(NEWER) + "\n\n" + json.dumps(OLDER) + "\n")
    return path


def test_the_table_has_one_row_per_run_oldest_first_with_the_chosen_keys(tmp_path: Path) -> None:
    runs = trend.load(write_history(tmp_path / "history.jsonl"))
    # Runs without `bare_` keys measured creates and checks without an Idempotency-Key.
    keys = ["bare_sqlite_create_ratio", "bare_pg_create_p99_ms"]
    lines = trend.render(runs, keys).splitlines()

    assert len(lines) == 4  # header, rule, two runs
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    assert header == [
        "date (UTC)",
        "commit",
        "load",
        "source",
        *keys,
    ]
    older = [cell.strip() for cell in lines[2].strip("|").split("|")]
    newer = [cell.strip() for cell in lines[3].strip("|").split("|")]
    assert older == ["2026-11-25 19:05", "5dfed9c", "0.50", "docs", "0.37", "-"]
    assert newer == ["2026-11-26 01:45", "e8370fe-dirty", "0.61", "run", "0.39", "17.3"]


def test_the_default_columns_are_the_headline_keys(tmp_path: Path) -> None:
    runs = trend.load(write_history(tmp_path / "history.jsonl"))
    header = trend.render(runs).splitlines()[0]

    for key in trend.HEADLINE:
        assert key in header
    assert "691" in trend.render(runs)


def test_the_command_prints_a_history_file_given_on_its_command_line(tmp_path: Path) -> None:
    history = write_history(tmp_path / "history.jsonl")
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "trend.py"), str(history), "--keys", "all"],
        capture_output=True,
        text=True,
        check=True,
    )

    rows = done.stdout.splitlines()
    assert len(rows) == 4
    assert "sqlite_create_ratio" in rows[0]
    assert "pg_create_p99_ms" in rows[0]
    assert "5dfed9c" in rows[2]
    assert "e8370fe-dirty" in rows[3]


def test_a_run_summary_becomes_a_line_with_its_date_and_commit_first(tmp_path: Path) -> None:
    summary = {
        "started_at": "2026-11-26T06:00:00+00:00",
        "smoke": False,
        "machine": {"cores": 2, "load_average": [0.4, 0.3, 0.2], "commit": "abc1234"},
        "parts": ["sqlite"],
        "sqlite_create_ratio": 0.4,
        "seconds": {"sqlite": 61.0, "total": 61.0},
        "errors": {},
    }
    history = tmp_path / "history.jsonl"
    trend.append(history, trend.record(summary))
    trend.append(history, trend.record({**summary, "started_at": "2026-11-26T07:00:00+00:00"}))

    lines = history.read_text().splitlines()
    assert len(lines) == 2
    first = json.loads(lines[0])
    assert list(first)[:3] == ["date", "commit", "source"]
    assert first["date"] == "2026-11-26T06:00:00Z"
    assert first["commit"] == "abc1234"
    assert first["machine"] == {"cores": 2, "load_average": [0.4, 0.3, 0.2]}
    assert first["sqlite_create_ratio"] == 0.4
    assert "smoke" not in first


def test_every_committed_history_line_parses_and_carries_its_commit_and_date() -> None:
    lines = [line for line in COMMITTED.read_text().splitlines() if line.strip()]

    assert lines, "bench/results/history.jsonl is empty"
    for number, line in enumerate(lines, 1):
        run = json.loads(line)
        assert isinstance(run, dict), f"line {number}"
        assert isinstance(run.get("commit"), str), f"line {number}: no commit"
        assert run["commit"], f"line {number}: an empty commit"
        assert isinstance(run.get("date"), str), f"line {number}: no date"
        assert run["date"].endswith("Z"), f"line {number}: not a UTC date"
        assert run.get("source") in {"docs", "make bench"}, f"line {number}"
        assert not run.get("smoke"), f"line {number}: smoke figures are never kept"
        assert any(key in run for key in trend.HEADLINE), f"line {number}: no figures"


def test_the_committed_history_is_not_ignored_by_git() -> None:
    done = subprocess.run(
        ["git", "check-ignore", "--quiet", "bench/results/history.jsonl"], cwd=ROOT, check=False
    )
    assert done.returncode == 1  # 1: not ignored; 0 would mean git ignores it
