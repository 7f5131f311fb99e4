"""Start `relay serve` processes on one database, for tests that need several real servers."""

from __future__ import annotations

import contextlib
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


@dataclass(frozen=True)
class Served:
    base_url: str
    cert: Path

    def client(self, key: str | None = None) -> httpx.Client:
        context = ssl.create_default_context(cafile=os.fspath(self.cert))
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=self.base_url, verify=context, headers=headers, timeout=60)


@contextlib.contextmanager
def relay_servers(count: int, tmp: Path, database_url: str, **env: str) -> Iterator[list[Served]]:
    processes: list[subprocess.Popen[bytes]] = []
    served: list[Served] = []
    try:
        for index in range(count):
            data_dir = tmp / f"node-{index}"
            port = free_port()
            environment = {
                **os.environ,
                "RELAY_DATA_DIR": os.fspath(data_dir),
                "RELAY_DATABASE_URL": database_url,
                "RELAY_CODE_KEY": TEST_CODE_KEY,
                **env,
            }
            processes.append(
                subprocess.Popen(
                    [sys.executable, "-m", "relay.cli.main", "serve", "--port", str(port)],
                    env=environment,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
            served.append(Served(f"https://127.0.0.1:{port}", data_dir / "tls" / "cert.pem"))
        for node, process in zip(served, processes, strict=True):
            _wait_until_ready(node, process)
        yield served
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=20)


def _wait_until_ready(node: Served, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert process.poll() is None, "relay serve exited early"
        if node.cert.exists():
            with (
                contextlib.suppress(httpx.TransportError, ssl.SSLError),
                node.client() as client,
            ):
                if client.get("/healthz").status_code == 200:
                    return
        time.sleep(0.1)
    raise RuntimeError(f"relay serve at {node.base_url} did not start")
