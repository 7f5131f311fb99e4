"""The SQLite file's disk full, or its filesystem read-only: a clear error (a 503 to
requests while the disk is full; one line and exit 1 from `relay serve` started on a
read-only file), the file intact after (`PRAGMA integrity_check`), and Relay working
again when space or write access returns.

The database lives on a small tmpfs mounted for the test (root only; skipped
where mounting is not permitted, as in an unprivileged container).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import sqlite3
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from relay.db.migrate import upgrade
from tests.faults.relay_process import RELAY, RelayProcess, eventually
from tests.harness import free_port

SIZE = "8m"


@contextlib.contextmanager
def small_filesystem(where: Path) -> Iterator[Path]:
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={SIZE}", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def remount(where: Path, mode: str) -> None:
    done = subprocess.run(
        ["mount", "-o", f"remount,{mode}", str(where)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr


def fill(path: Path) -> None:
    """Writes `path` until the filesystem has no byte left."""
    chunk = b"\0" * 65536
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            try:
                os.write(descriptor, chunk)
            except OSError as error:
                if error.errno != errno.ENOSPC:
                    raise
                if len(chunk) == 1:
                    return
                chunk = chunk[: len(chunk) // 2]
    finally:
        os.close(descriptor)


def integrity(database: Path) -> list[Any]:
    connection = sqlite3.connect(database)
    try:
        return [row[0] for row in connection.execute("PRAGMA integrity_check")]
    finally:
        connection.close()


def stored_ids(database: Path) -> set[str]:
    connection = sqlite3.connect(database)
    try:
        return {row[0] for row in connection.execute("SELECT id FROM verifications")}
    finally:
        connection.close()


@pytest.fixture
def mount(tmp_path: Path) -> Iterator[Path]:
    with small_filesystem(tmp_path / "mnt") as where:
        yield where


@pytest.fixture
def relay(tmp_path: Path, mount: Path) -> Iterator[RelayProcess]:
    url = f"sqlite:///{mount / 'relay.sqlite3'}"
    upgrade(url)
    process = RelayProcess(tmp_path, url)
    try:
        yield process
    finally:
        process.stop()


async def create(client: httpx.AsyncClient, n: int) -> httpx.Response:
    return await client.post("/v1/verifications", json={"to": f"+1415558{n % 10000:04d}"})


def refusal(response: httpx.Response) -> dict[str, Any]:
    error: dict[str, Any] = response.json()["error"]
    return error


@pytest.mark.slow
async def test_a_full_disk_answers_503_keeps_the_file_intact_and_recovers_when_space_returns(
    relay: RelayProcess, mount: Path
) -> None:
    key = (await asyncio.to_thread(relay.account))["test_key"]
    await asyncio.to_thread(relay.start)
    answered: list[str] = []
    statuses: Counter[int] = Counter()
    async with relay.client(key) as client:
        for n in range(10):
            made = await create(client, n)
            assert made.status_code == 200, made.text
            answered.append(made.json()["id"])
        await asyncio.to_thread(fill, mount / "filler")

        # Writes fail once the WAL or the file must grow; until then they may succeed.
        refusals: list[dict[str, Any]] = []
        deadline, n = time.monotonic() + 20, 10
        while len(refusals) < 3 and time.monotonic() < deadline:
            n += 1
            made = await create(client, n)
            statuses[made.status_code] += 1
            if made.status_code == 200:
                answered.append(made.json()["id"])
            else:
                refusals.append(refusal(made))
        print(f"creates on a full disk: {dict(statuses)}")  # shown with -s
        assert set(statuses) <= {200, 503}, (statuses, relay.output())
        assert len(refusals) >= 3, statuses
        for error in refusals:
            assert (error["type"], error["code"]) == ("api_error", "database_unavailable")
        assert (await client.get(f"/v1/verifications/{answered[0]}")).status_code == 200

        (mount / "filler").unlink()

        async def writes_again() -> bool:
            made = await create(client, n + 1)
            if made.status_code == 200:
                answered.append(made.json()["id"])
            return made.status_code == 200

        await eventually(writes_again, within=15, what="a create after space returned")
    await asyncio.to_thread(relay.stop)

    database = mount / "relay.sqlite3"
    assert integrity(database) == ["ok"]
    assert set(answered) <= stored_ids(database)
    assert "http.unhandled" not in relay.whole_log()


@pytest.mark.slow
async def test_a_read_only_filesystem_stops_the_start_with_one_line_and_writes_resume_after(
    relay: RelayProcess, mount: Path
) -> None:
    key = (await asyncio.to_thread(relay.account))["test_key"]
    await asyncio.to_thread(relay.start)
    async with relay.client(key) as client:
        before = await create(client, 1)
        assert before.status_code == 200, before.text
    await asyncio.to_thread(relay.stop)
    # Linux refuses to remount read-only while a file is open for writing: the
    # filesystem turns read-only between two runs of the server (a full-disk
    # protection, an operator's mistake), and the server starts on it.
    remount(mount, "ro")
    refused = await asyncio.to_thread(
        subprocess.run,
        [*RELAY, "serve", "--port", str(free_port())],
        env=relay.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 1, refused.stderr
    assert "relay: database: unable to open database file" in refused.stderr
    assert "Traceback" not in refused.stderr

    remount(mount, "rw")
    await asyncio.to_thread(relay.start)
    async with relay.client(key) as client:
        after = await create(client, 3)
        assert after.status_code == 200, after.text
    await asyncio.to_thread(relay.stop)
    database = mount / "relay.sqlite3"
    assert integrity(database) == ["ok"]
    assert {before.json()["id"], after.json()["id"]} <= stored_ids(database)
    assert "http.unhandled" not in relay.whole_log()
