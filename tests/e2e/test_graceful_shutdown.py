"""SIGTERM to `relay serve`: stop accepting, finish what is in flight, give back the rest, exit 0.

Real processes throughout: `relay serve` over HTTPS, a Twilio-shaped carrier
that answers slowly (or never), and a webhook receiver that answers late (or
never).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from relay.config import Settings
from tests.harness import count_rows, free_port, test_settings
from tests.webhooks.receiver import (
    Identity,
    Receiver,
    isolated_database,
    running_receiver,
    wait_until,
    write_identity,
)

RELAY = [sys.executable, "-m", "relay.cli.main"]
ACCOUNT_SID = "AC" + "0" * 32


@dataclass
class SlowCarrier:
    """Twilio's Messages create, answered after `delay` seconds (or when released)."""

    delay: float
    port: int = 0
    arrived: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)


@pytest.fixture
def carrier_factory() -> Iterator[Any]:
    servers: list[tuple[ThreadingHTTPServer, SlowCarrier]] = []

    def start(delay: float) -> SlowCarrier:
        carrier = SlowCarrier(delay)

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                carrier.arrived.set()
                carrier.released.wait(carrier.delay)
                body = json.dumps({"sid": "SM" + secrets.token_hex(16), "status": "queued"})
                self.send_response(201)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body.encode())

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        carrier.port = server.server_address[1]
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append((server, carrier))
        return carrier

    yield start
    for server, carrier in servers:
        carrier.released.set()
        server.shutdown()
        server.server_close()


@pytest.fixture
def identity(tmp_path: Path) -> Identity:
    return write_identity(tmp_path)


@pytest.fixture
def receiver(identity: Identity) -> Iterator[Receiver]:
    with running_receiver(identity) as running:
        yield running


@dataclass
class Relay:
    process: subprocess.Popen[str]
    base_url: str
    cert: Path
    settings: Settings
    keys: dict[str, str]

    def post(self, key: str, body: dict[str, Any]) -> httpx.Response:
        with httpx.Client(
            base_url=self.base_url,
            verify=ssl.create_default_context(cafile=os.fspath(self.cert)),
            headers={"Authorization": f"Bearer {self.keys[key]}"},
            timeout=60,
        ) as client:
            return client.post("/v1/verifications", json=body)

    def terminate_and_wait(self) -> tuple[int, float]:
        started = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=60)
        return code, time.monotonic() - started


def start_relay(
    tmp_path: Path,
    database_url: str,
    carrier: SlowCarrier,
    identity: Identity,
    **extra: str,
) -> Relay:
    url = isolated_database(database_url, "shutdown", tmp_path)
    port = free_port()
    config = tmp_path / "relay.toml"
    config.write_text(
        f'public_url = "https://127.0.0.1:{port}"\n'
        'webhook_allowed_networks = ["127.0.0.0/8"]\n'
        f'webhook_ca_bundle = "{identity.ca_path}"\n'
        "webhook_timeout = 20.0\n"
        "[carriers.slow]\n"
        'kind = "http"\nprovider = "twilio"\n'
        f'account_sid = "{ACCOUNT_SID}"\nauth_token = "token-for-tests"\n'
        f'from_number = "+15005550006"\nbase_url = "http://127.0.0.1:{carrier.port}"\n'
        "timeout = 30.0\n"
        '[routes]\ndefault = ["slow"]\n'
    )
    env = {
        **os.environ,
        "RELAY_DATA_DIR": os.fspath(tmp_path / "data"),
        "RELAY_DATABASE_URL": url,
        "RELAY_CONFIG": os.fspath(config),
        **extra,
    }
    made = subprocess.run(
        [*RELAY, "accounts", "create", "Acme", "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    keys = json.loads(made.stdout)
    process = subprocess.Popen(
        [*RELAY, "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    line = ""
    while "listening" not in line:
        line = process.stdout.readline()
        assert line, "relay serve exited before it listened"
    # Read on in the background so a chatty server never blocks on a full pipe.
    threading.Thread(target=process.stdout.read, daemon=True).start()
    settings = test_settings(tmp_path / "data", url)
    cert = tmp_path / "data" / "tls" / "cert.pem"
    return Relay(process, f"https://127.0.0.1:{port}", cert, settings, keys)


def in_thread(call: Any) -> tuple[threading.Thread, list[Any]]:
    result: list[Any] = []

    def run() -> None:
        try:
            result.append(call())
        except Exception as error:
            result.append(error)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, result


def held(settings: Settings) -> tuple[int, int]:
    """Leases still held: on SMS attempts, on webhook deliveries."""
    attempts = count_rows(
        settings, "SELECT count(*) AS n FROM attempts WHERE lease_owner IS NOT NULL"
    )
    events = count_rows(settings, "SELECT count(*) AS n FROM events WHERE lease_owner IS NOT NULL")
    return attempts, events


def test_sigterm_lets_a_slow_request_and_a_late_webhook_finish_then_exits_0(
    tmp_path: Path,
    database_url: str,
    carrier_factory: Any,
    identity: Identity,
    receiver: Receiver,
) -> None:
    carrier = carrier_factory(delay=2.0)
    relay = start_relay(tmp_path, database_url, carrier, identity)
    try:
        hooked = relay.post(
            "test_key", {"to": "+14155550100", "webhook_url": receiver.url("/late")}
        )
        assert hooked.status_code == 200
        wait_until(lambda: receiver.requests("/late"), what="a webhook attempt in flight")
        thread, answer = in_thread(lambda: relay.post("live_key", {"to": "+14155550101"}))
        assert carrier.arrived.wait(20), "the carrier never got the submit"

        code, _ = relay.terminate_and_wait()
        thread.join(timeout=30)
    finally:
        if relay.process.poll() is None:
            relay.process.kill()
    assert code == 0
    response = answer[0]
    assert isinstance(response, httpx.Response), response
    assert response.status_code == 200
    assert response.json()["attempts"][0]["status"] == "sent"
    assert receiver.answered, "the late webhook was cut off"
    delivered = count_rows(
        relay.settings, "SELECT count(*) AS n FROM events WHERE delivery_status = 'delivered'"
    )
    assert delivered == len(set(receiver.answered))
    assert held(relay.settings) == (0, 0)


def test_sigterm_gives_up_on_what_outlasts_the_grace_and_releases_its_leases(
    tmp_path: Path,
    database_url: str,
    carrier_factory: Any,
    identity: Identity,
    receiver: Receiver,
) -> None:
    carrier = carrier_factory(delay=60.0)
    relay = start_relay(tmp_path, database_url, carrier, identity, RELAY_SHUTDOWN_TIMEOUT="1")
    try:
        hooked = relay.post(
            "test_key", {"to": "+14155550102", "webhook_url": receiver.url("/hang")}
        )
        assert hooked.status_code == 200
        wait_until(lambda: receiver.requests("/hang"), what="a webhook attempt in flight")
        thread, _ = in_thread(lambda: relay.post("live_key", {"to": "+14155550103"}))
        assert carrier.arrived.wait(20), "the carrier never got the submit"

        code, took = relay.terminate_and_wait()
        thread.join(timeout=30)
    finally:
        if relay.process.poll() is None:
            relay.process.kill()
    assert code == 0
    # A grace for the requests, one for the jobs, and room for a loaded machine.
    assert took < 8, f"stopping took {took:.1f} s"
    assert held(relay.settings) == (0, 0)
    # The cut submit is queued and due now for any other process; the cut
    # webhook attempts are not counted, so the next claim makes them again.
    queued = count_rows(
        relay.settings, "SELECT count(*) AS n FROM attempts WHERE status = 'queued'"
    )
    assert queued == 1
    counted = count_rows(
        relay.settings,
        "SELECT count(*) AS n FROM events WHERE delivery_status = 'pending' AND attempt_count > 0",
    )
    assert counted == 0
