"""`relay serve` as a real process for end-to-end tests, its output kept in files."""

from __future__ import annotations

import contextlib
import json
import os
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.harness import TEST_CODE_KEY, free_port

RELAY = [sys.executable, "-m", "relay.cli.main"]


@dataclass(frozen=True)
class Serving:
    base_url: str
    cert: Path
    account: dict[str, str]
    stdout: Path
    stderr: Path
    process: subprocess.Popen[bytes]
    # What the server runs with: a command given it works on the same data and database.
    environment: dict[str, str]

    def client(self, key: str | None = None) -> httpx.Client:
        context = ssl.create_default_context(cafile=os.fspath(self.cert))
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=self.base_url, verify=context, headers=headers, timeout=60)


@contextlib.contextmanager
def relay_serve(
    tmp: Path, database_url: str, *args: str, workers: int = 1, **env: str
) -> Iterator[Serving]:
    """A started `relay serve` with a fresh account; stopped with SIGTERM on exit."""
    data_dir = tmp / "data"
    environment = {
        **os.environ,
        "RELAY_DATA_DIR": os.fspath(data_dir),
        "RELAY_DATABASE_URL": database_url,
        "RELAY_CODE_KEY": TEST_CODE_KEY,
        **env,
    }
    environment.pop("PROMETHEUS_MULTIPROC_DIR", None)
    made = subprocess.run(
        [*RELAY, "accounts", "create", "Metrics", "--json"],
        env=environment,
        capture_output=True,
        check=True,
        timeout=120,
    )
    port = free_port()
    stdout, stderr = tmp / "stdout.log", tmp / "stderr.log"
    with stdout.open("wb") as out, stderr.open("wb") as err:
        process = subprocess.Popen(
            [*RELAY, "serve", "--port", str(port), "--workers", str(workers), *args],
            env=environment,
            stdout=out,
            stderr=err,
        )
    serving = Serving(
        f"https://127.0.0.1:{port}",
        data_dir / "tls" / "cert.pem",
        json.loads(made.stdout),
        stdout,
        stderr,
        process,
        environment,
    )
    try:
        _wait_until_started(serving, workers)
        yield serving
    finally:
        process.terminate()
        process.wait(timeout=30)


def _wait_until_started(serving: Serving, workers: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert serving.process.poll() is None, serving.stderr.read_text()
        started = serving.stderr.read_text().count("Application startup complete")
        if started >= workers and serving.cert.exists():
            with (
                contextlib.suppress(httpx.TransportError, ssl.SSLError),
                serving.client() as client,
            ):
                if client.get("/healthz").status_code == 200:
                    return
        time.sleep(0.1)
    raise AssertionError("relay serve did not start:\n" + serving.stderr.read_text())
