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
# A file per worker process, `<pid>.worker`, beside prometheus-client's `*.db` files
# (which alone it reads): the processes whose liveness a scrape checks.
WORKER_SUFFIX = ".worker"


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
        for stale in (*path.glob("*.db"), *path.glob(f"*{WORKER_SUFFIX}")):
            stale.unlink()
        return Prepared(path, owned=False)
    if workers <= 1:
        return None
    path = Path(tempfile.mkdtemp(prefix="relay-metrics-"))
    os.environ[ENV] = os.fspath(path)
    return Prepared(path, owned=True)


def in_use() -> bool:
    return bool(os.environ.get(ENV))


def forget_dead_workers() -> None:
    """Record this process as a worker; drop the live gauges of recorded workers that exited.

    A worker that died keeps its files: its counters still count, its live
    gauges (in flight now, connections open) must not. Run as each worker
    starts (a replacement comes up right after a death) and at each scrape.
    """
    given = os.environ.get(ENV)
    if not given:
        return
    from prometheus_client import multiprocess

    path = Path(given)
    (path / f"{os.getpid()}{WORKER_SUFFIX}").touch()
    for record in path.glob(f"*{WORKER_SUFFIX}"):
        pid = record.name.removesuffix(WORKER_SUFFIX)
        if not pid.isdigit() or _alive(int(pid)):
            continue
        multiprocess.mark_process_dead(int(pid), given)  # type: ignore[no-untyped-call]
        record.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        # Signal 0 is delivered to nobody: it only asks whether the process exists.
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, as another user's process
    return True
