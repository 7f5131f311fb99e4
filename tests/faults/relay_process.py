"""`relay serve` as a process that fault tests kill, restart and starve.

One `RelayProcess` is one data directory, one database and one config file
(carriers and routes); each `start` runs a new `relay serve` on a new port
over them, its output appended to one log file that failures print.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from tests.harness import TEST_CODE_KEY, free_port

RELAY = [sys.executable, "-m", "relay.cli.main"]
ESME_RSUBMITFAIL, ESME_RTHROTTLED = 0x45, 0x58
DELIVERED = {"stat": "DELIVRD", "form": "tlv"}


def smpp_carrier(port: int, **extra: Any) -> dict[str, Any]:
    return {
        "kind": "smpp",
        "host": "127.0.0.1",
        "port": port,
        "system_id": "relay",
        "password": "secret",
        "response_timeout": 3.0,
        "reconnect_backoff": [0.05, 0.2],
        "throttle_retry_after": 0.3,
        "receipt_timeout": 5.0,
        **extra,
    }


def toml_config(carriers: dict[str, dict[str, Any]], routes: dict[str, list[str]]) -> str:
    """JSON values are valid TOML values for the strings, numbers and lists used here."""
    lines: list[str] = []
    for name, fields in carriers.items():
        lines.append(f"[carriers.{name}]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in fields.items()]
    lines.append("[routes]")
    lines += [f"{country} = {json.dumps(names)}" for country, names in routes.items()]
    return "\n".join(lines) + "\n"


class RelayProcess:
    def __init__(self, directory: Path, database_url: str, **env: str) -> None:
        self.directory = directory
        self.log = directory / "serve.log"
        self.env = {
            **os.environ,
            "RELAY_DATA_DIR": os.fspath(directory / "data"),
            "RELAY_DATABASE_URL": database_url,
            "RELAY_CODE_KEY": TEST_CODE_KEY,
            "RELAY_RATE_LIMIT": "1000000",
            "RELAY_RATE_LIMIT_BURST": "1000000",
            "RELAY_PUMPING_GUARD": "off",
            **env,
        }
        self.env.pop("PROMETHEUS_MULTIPROC_DIR", None)
        self.process: subprocess.Popen[bytes] | None = None
        self.base_url = ""

    @property
    def cert(self) -> Path:
        return Path(self.env["RELAY_DATA_DIR"]) / "tls" / "cert.pem"

    def configure(self, carriers: dict[str, dict[str, Any]], routes: dict[str, list[str]]) -> None:
        config = self.directory / "relay.toml"
        config.write_text(toml_config(carriers, routes))
        self.env["RELAY_CONFIG"] = os.fspath(config)

    def account(self) -> dict[str, str]:
        made = subprocess.run(
            [*RELAY, "accounts", "create", "Faults", "--json"],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert made.returncode == 0, made.stderr
        account: dict[str, str] = json.loads(made.stdout)
        return account

    def start(self) -> None:
        port = free_port()
        self.base_url = f"https://127.0.0.1:{port}"
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [*RELAY, "serve", "--port", str(port)],
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self._wait_started()

    def _wait_started(self) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.process is not None
            assert self.process.poll() is None, f"relay serve exited:\n{self.output()}"
            if self.cert.exists():
                with contextlib.suppress(httpx.TransportError, ssl.SSLError):
                    got = httpx.get(f"{self.base_url}/healthz", verify=self.tls(), timeout=5)
                    if got.status_code == 200:
                        return
            time.sleep(0.1)
        raise AssertionError(f"relay serve did not start:\n{self.output()}")

    def kill(self) -> None:
        """SIGKILL: no shutdown, no flush, whatever was in flight is cut."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=20)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=20)

    def output(self) -> str:
        """The end of the log, for failure messages."""
        return self.whole_log()[-6000:]

    def whole_log(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def tls(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=os.fspath(self.cert))

    def client(self, key: str | None, *, timeout: float = 10) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.AsyncClient(
            base_url=self.base_url, verify=self.tls(), headers=headers, timeout=timeout
        )


async def eventually(condition: Any, *, within: float, what: str, every: float = 0.1) -> None:
    """Awaits `condition()` (sync or async) until it is true."""
    deadline = time.monotonic() + within
    while True:
        result = condition()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within:g} s waiting for {what}")
        await asyncio.sleep(every)
