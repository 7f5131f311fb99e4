"""A Redis server of a test's own, to kill and start again while Relay counts in it.

The machine's Redis on 6379 serves other tests and is never touched: this one runs
on a free port, keeps nothing on disk, and is killed (SIGKILL) as an outage would.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.harness import free_port


class PrivateRedis:
    def __init__(self, directory: Path) -> None:
        if shutil.which("redis-server") is None:
            pytest.skip("needs redis-server")
        self.directory = directory
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        command = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1"]
        command += ["--save", "", "--appendonly", "no", "--dir", str(self.directory)]
        self.process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise AssertionError(f"redis-server did not start on port {self.port}")

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=10)
            self.process = None

    def keys(self) -> int:
        """How many keys it holds (DBSIZE), through the protocol's inline form."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=2) as connection:
            connection.sendall(b"DBSIZE\r\n")
            answer = connection.recv(64)
        assert answer.startswith(b":"), answer
        return int(answer[1:].strip())
