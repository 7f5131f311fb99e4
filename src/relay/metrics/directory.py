"""The directory where `relay serve --workers N` processes keep their metric values.

prometheus-client's multiprocess mode: each process writes its values to files
of its own in one directory, and a scrape, answered by any process, adds them up.
The directory must be empty when the server starts (values of an earlier run
would be added in) and is named by PROMETHEUS_MULTIPROC_DIR before any process
loads the client. Imports no part of prometheus-client, for that reason.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

ENV = "PROMETHEUS_MULTIPROC_DIR"


@dataclass(frozen=True)
class Prepared:
    path: Path
    # Made by Relay, so removed by it at exit; an operator's directory is only emptied.
    owned: bool

    def remove(self) -> None:
        if self.owned:
            shutil.rmtree(self.path, ignore_errors=True)


def prepare(workers: int) -> Prepared | None:
    """Name an empty directory in the environment (inherited by spawned workers).

    One process keeps its values in memory unless the operator named a directory.
    """
    given = os.environ.get(ENV)
    if given:
        path = Path(given)
        path.mkdir(parents=True, exist_ok=True)
        for stale in path.glob("*.db"):
            stale.unlink()
        return Prepared(path, owned=False)
    if workers <= 1:
        return None
    path = Path(tempfile.mkdtemp(prefix="relay-metrics-"))
    os.environ[ENV] = os.fspath(path)
    return Prepared(path, owned=True)


def in_use() -> bool:
    return bool(os.environ.get(ENV))


def mark_dead(pid: int) -> None:
    """A worker exited: its live gauges no longer count (its counters still do)."""
    if not in_use():
        return
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(pid)  # type: ignore[no-untyped-call]
