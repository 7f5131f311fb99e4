"""A PostgreSQL server of a test's own, to stop and start while Relay runs on it.

The suite's shared server on 127.0.0.1:5432 serves everyone else's tests, so
it is never stopped: this one is `initdb` in a temporary directory, on a free
port, run as the `postgres` user (PostgreSQL refuses to run as root).
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import pytest

from tests.harness import free_port


async def _create_database(port: int) -> None:
    connection = await asyncpg.connect(f"postgresql://postgres@127.0.0.1:{port}/postgres")
    try:
        await connection.execute("CREATE DATABASE relay")
    finally:
        await connection.close()


def _binaries() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(found[-1]).parent if found else None


@dataclass
class PrivatePostgres:
    bin: Path
    data: Path
    port: int
    as_user: list[str]

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/relay"

    def _pg_ctl(self, *args: str) -> None:
        command = [*self.as_user, str(self.bin / "pg_ctl"), "-D", str(self.data), *args]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, f"{command}: {done.stdout}\n{done.stderr}"

    def start(self) -> None:
        options = f"-p {self.port} -k {self.data} -c listen_addresses=127.0.0.1 -c fsync=off"
        log = str(self.data / "server.log")
        self._pg_ctl("start", "-w", "-t", "30", "-o", options, "-l", log)

    def stop(self) -> None:
        """Fast shutdown: every session is cut, as when the server is restarted."""
        self._pg_ctl("stop", "-w", "-t", "30", "-m", "fast")


@contextlib.contextmanager
def private_postgres() -> Iterator[PrivatePostgres]:
    binaries = _binaries()
    if binaries is None:
        pytest.skip("no PostgreSQL server binaries under /usr/lib/postgresql/*/bin")
    as_user: list[str] = []
    root = Path(tempfile.mkdtemp(prefix="relay-faults-pg-"))
    if os.geteuid() == 0:
        if shutil.which("runuser") is None:
            pytest.skip("running as root without runuser: cannot run PostgreSQL as postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
        shutil.chown(root, "postgres", "postgres")
    data = root / "data"
    init = [*as_user, str(binaries / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust"]
    done = subprocess.run(init, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    server = PrivatePostgres(binaries, data, free_port(), as_user)
    server.start()
    try:
        asyncio.run(_create_database(server.port))
        yield server
    finally:
        with contextlib.suppress(AssertionError):
            server.stop()
        shutil.rmtree(root, ignore_errors=True)
