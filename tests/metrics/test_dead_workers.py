"""The live gauges of a `relay serve --workers N` process that exited stop counting."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

# Loaded before any test names a directory: prometheus-client picks its storage on
# import, and this process's own metrics stay in memory.
import prometheus_client.multiprocess  # noqa: F401
import pytest

from relay.metrics import directory


def exited_pid() -> int:
    """The id of a process that has come and gone."""
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    return int(done.stdout)


def test_a_worker_that_exited_loses_its_live_gauges_and_keeps_its_counters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(directory.ENV, os.fspath(tmp_path))
    dead, alive = exited_pid(), os.getpid()
    for pid in (dead, alive):
        (tmp_path / f"{pid}{directory.WORKER_SUFFIX}").touch()
        (tmp_path / f"gauge_livesum_{pid}.db").touch()
        (tmp_path / f"counter_{pid}.db").touch()

    directory.forget_dead_workers()

    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [
            f"counter_{dead}.db",
            f"counter_{alive}.db",
            f"gauge_livesum_{alive}.db",
            f"{alive}{directory.WORKER_SUFFIX}",
        ]
    )


def test_a_worker_records_itself_so_its_death_can_be_seen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(directory.ENV, os.fspath(tmp_path))

    directory.forget_dead_workers()

    assert (tmp_path / f"{os.getpid()}{directory.WORKER_SUFFIX}").exists()


def test_one_process_without_a_directory_records_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(directory.ENV, raising=False)
    monkeypatch.chdir(tmp_path)

    directory.forget_dead_workers()

    assert list(tmp_path.iterdir()) == []


def test_a_start_clears_the_worker_records_of_an_earlier_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(directory.ENV, os.fspath(tmp_path))
    (tmp_path / f"123{directory.WORKER_SUFFIX}").touch()
    (tmp_path / "counter_123.db").touch()

    directory.prepare(2)

    assert list(tmp_path.iterdir()) == []
