"""`relay serve --workers N`: several API processes on one port, PostgreSQL only."""

from __future__ import annotations

import contextlib
import json
import os
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from relay.db.urls import is_postgres
from tests.harness import free_port

RELAY = [sys.executable, "-m", "relay.cli.main"]
# Read directly rather than through the `database_url` fixture: that fixture
# drops the schema, and this test needs only what `relay serve` migrates.
PG_URL = os.environ.get("RELAY_TEST_DATABASE_URL", "")
CONNECTIONS = 40


def test_serving_sqlite_from_several_processes_is_refused_before_anything_starts(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    env = {
        **os.environ,
        "RELAY_DATA_DIR": os.fspath(data_dir),
        "RELAY_DATABASE_URL": f"sqlite:///{data_dir / 'relay.sqlite3'}",
    }
    started = time.monotonic()
    refused = subprocess.run(
        [*RELAY, "serve", "--workers", "2", "--port", str(free_port())],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert refused.returncode != 0
    assert "SQLite file has one writer" in refused.stderr
    assert "--database-url" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert time.monotonic() - started < 15
    # No migration ran and no certificate was made: the refusal came first.
    assert not data_dir.exists()


@pytest.mark.skipif(
    not (PG_URL and is_postgres(PG_URL)),
    reason="needs RELAY_TEST_DATABASE_URL=postgresql://…: several processes need PostgreSQL",
)
def test_two_processes_answer_on_one_port_and_stop_with_their_parent(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "RELAY_DATA_DIR": os.fspath(tmp_path / "data"),
        "RELAY_DATABASE_URL": PG_URL,
    }
    account = json.loads(
        subprocess.run(
            [*RELAY, "accounts", "create", "Workers", "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout
    )
    port = free_port()
    parent = subprocess.Popen(
        [*RELAY, "serve", "--workers", "2", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output = _collect(parent)
    cert = tmp_path / "data" / "tls" / "cert.pem"
    try:
        _wait_until_both_started(f"https://127.0.0.1:{port}", cert, parent, output)
        with _open_connections(port, cert, account["test_key"]) as statuses:
            assert statuses == [200] * CONNECTIONS
            servers = _pids_serving(port)
        assert len(servers) == 2, servers
        assert parent.pid not in servers
        assert all(_parent_of(pid) == parent.pid for pid in servers)
    finally:
        parent.terminate()
        parent.wait(timeout=30)
    log = "".join(output)
    assert parent.returncode == 0, log
    assert log.count("Relay listening on") == 1, log
    assert not [pid for pid in servers if Path(f"/proc/{pid}").exists()], log


@contextlib.contextmanager
def _open_connections(port: int, cert: Path, key: str) -> Iterator[list[int]]:
    """Each request on its own connection, all left open so their owners can be found."""
    context = ssl.create_default_context(cafile=os.fspath(cert))
    clients = [
        httpx.Client(
            base_url=f"https://127.0.0.1:{port}",
            verify=context,
            headers={"Authorization": f"Bearer {key}"},
            timeout=30,
        )
        for _ in range(CONNECTIONS)
    ]
    try:
        with ThreadPoolExecutor(max_workers=CONNECTIONS) as pool:
            statuses = list(
                pool.map(lambda client: client.get("/v1/verifications").status_code, clients)
            )
        yield statuses
    finally:
        for client in clients:
            client.close()


def _pids_serving(port: int) -> set[int]:
    """Processes holding the server end of an established TCP connection on `port`."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(FileNotFoundError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                local_port = int(fields[1].rsplit(":", 1)[1], 16)
                if local_port == port and fields[3] == "01":  # 01: ESTABLISHED
                    inodes.add(f"socket:[{fields[9]}]")
    pids = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if any(os.readlink(fd) in inodes for fd in (proc / "fd").iterdir()):
                pids.add(int(proc.name))
    return pids


def _parent_of(pid: int) -> int:
    # The command name in /proc/PID/stat is in parentheses and may hold spaces.
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


def _collect(process: subprocess.Popen[str]) -> list[str]:
    lines: list[str] = []

    def read() -> None:
        assert process.stdout is not None
        lines.extend(process.stdout)

    threading.Thread(target=read, daemon=True).start()
    return lines


def _wait_until_both_started(
    base_url: str, cert: Path, process: subprocess.Popen[str], output: list[str]
) -> None:
    # One process answering is not enough: connections made before the second
    # one listens would all go to the first.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert process.poll() is None, "".join(output)
        started = sum("Application startup complete" in line for line in output)
        if started == 2 and cert.exists():
            with contextlib.suppress(httpx.TransportError, ssl.SSLError):
                context = ssl.create_default_context(cafile=os.fspath(cert))
                if httpx.get(f"{base_url}/healthz", verify=context).status_code == 200:
                    return
        time.sleep(0.2)
    raise AssertionError("relay serve --workers 2 did not start two processes:\n" + "".join(output))
