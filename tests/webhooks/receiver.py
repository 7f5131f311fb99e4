"""A webhook receiver twin for delivery tests: real HTTPS on loopback, in a thread.

It trusts nothing and records everything: each request's arrival time, raw
body, headers and the answer it got. Its behaviour is chosen by URL path.
Also here: a test CA for it, Relay servers configured to trust that CA, and
databases of their own for those servers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from sqlalchemy.engine import make_url

from relay.config import Settings
from relay.db.migrate import upgrade
from relay.db.sql import Tx
from relay.db.urls import is_postgres
from relay.events import store as event_store
from relay.events.models import EventType, NewEvent
from relay.ids import new_id
from relay.services import Services
from tests.harness import RunningServer, ServerThread, test_settings
from tests.webhooks.tls_receiver import ServerIdentity
from tests.webhooks.tls_receiver import write_identity as write_server_identity

# Short, so retries take well under seconds; spread apart, so their order shows.
SCHEDULE = (0.05, 0.6, 1.6)
# Generous: the receiver is a thread of the test process, beside Relay's own
# thread, and on a loaded CI machine a plain 302 once took over 1 s to arrive.
TIMEOUT = 2.5
LATE = 3.0

# --- a test CA and a certificate for localhost / 127.0.0.1 (tls_receiver's) --

Identity = ServerIdentity


def write_identity(directory: Path) -> Identity:
    return write_server_identity(directory, "Relay Webhook Test CA")


# --- the receiver -------------------------------------------------------------


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    arrived: float  # time.monotonic()

    @property
    def event(self) -> dict[str, Any]:
        parsed: dict[str, Any] = json.loads(self.body)
        return parsed

    @property
    def event_id(self) -> str:
        return str(self.event["id"])

    @property
    def signature(self) -> str:
        return self.headers["relay-signature"]


@dataclass
class Receiver:
    """Paths: /ok 200 · /error 500 · /redirect 302 · /hang never answers ·
    /huge 200 with an endless body · /slow 200 after 50 ms · /late 200 after
    `LATE` seconds (in flight while a test stops Relay) · /flaky 500 for
    the first two deliveries of each event id, then 200 · /once 500 for the
    first delivery of each event id, then 200 · /switch hangs
    while `hanging` is set, else 200."""

    port: int = 0
    hanging: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)
    huge_bytes_sent: int = 0
    # Event ids that got a 2xx answer.
    answered: list[str] = field(default_factory=list)
    _requests: list[Received] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    def requests(self, path: str | None = None) -> list[Received]:
        with self._lock:
            return [r for r in self._requests if path is None or r.path == path]

    def for_event(self, event_id: str) -> list[Received]:
        return [r for r in self.requests() if r.event_id == event_id]

    def seen(self, event_id: str) -> int:
        return len(self.for_event(event_id))

    def add(self, received: Received) -> None:
        with self._lock:
            self._requests.append(received)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        arrived = time.monotonic()
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        headers = {name.lower(): value for name, value in self.headers.items()}
        path = self.path
        receiver = self.server.receiver
        received = Received(path, headers, body, arrived)
        # Counted on arrival: a hanging request is received even though never answered.
        receiver.add(received)
        status = self._answer(path, body, receiver)
        if status is not None and 200 <= status < 300:
            with receiver._lock:
                receiver.answered.append(received.event_id)

    def _answer(self, path: str, body: bytes, receiver: Receiver) -> int | None:
        if path == "/hang" or (path == "/switch" and receiver.hanging.is_set()):
            receiver.released.wait(30)
            return None
        if path == "/huge":
            self._stream_forever(receiver)
            return 200
        if path == "/slow":
            time.sleep(0.05)
        if path == "/late":
            time.sleep(LATE)
        if path == "/once":
            event_id = json.loads(body)["id"]
            return self._reply(500 if receiver.seen(event_id) <= 1 else 200)
        if path == "/flaky":
            event_id = json.loads(body)["id"]
            return self._reply(500 if receiver.seen(event_id) <= 2 else 200)
        statuses = {
            "/ok": 200,
            "/slow": 200,
            "/late": 200,
            "/switch": 200,
            "/error": 500,
            "/redirect": 302,
        }
        return self._reply(statuses.get(path, 404))

    def _reply(self, status: int) -> int:
        # A refusal says so in its body, as receivers do: the console shows its start.
        body = b'{"error": "refused by the test receiver"}' if status >= 400 else b"{}"
        self.send_response(status)
        if status == 302:
            self.send_header("Location", "/ok")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        return status

    def _stream_forever(self, receiver: Receiver) -> None:
        self.send_response(200)
        self.send_header("Connection", "close")
        self.end_headers()
        chunk = b"x" * 16384
        with contextlib.suppress(OSError):
            # Endless as far as Relay can tell; the cap only protects the test machine.
            while receiver.huge_bytes_sent < 64 * 1024 * 1024:
                self.wfile.write(chunk)
                receiver.huge_bytes_sent += len(chunk)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    receiver: Receiver


@contextlib.contextmanager
def running_receiver(identity: Identity) -> Iterator[Receiver]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(identity.cert_path, identity.key_path)
    server = _Server(("127.0.0.1", 0), _Handler)
    # The handshake runs in each request's thread, not in the accept loop.
    server.socket = context.wrap_socket(
        server.socket, server_side=True, do_handshake_on_connect=False
    )
    receiver = Receiver(port=server.server_address[1])
    server.receiver = receiver
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.released.set()
        server.shutdown()
        server.server_close()


# --- Relay servers that trust the receiver, on databases of their own ---------


def isolated_database(base_url: str, name: str, directory: Path) -> str:
    """A fresh, migrated database for one test module.

    Every Relay process on a database delivers every due webhook on it, so a
    server built with other settings (the suite's shared `server`) must not
    share one with these tests.
    """
    if not is_postgres(base_url):
        url = f"sqlite:///{directory / f'{name}.sqlite3'}"
    else:
        parsed = make_url(base_url)
        database = f"{parsed.database}_{name}"
        asyncio.run(_recreate_postgres(parsed.set(database="postgres"), database))
        url = parsed.set(database=database).render_as_string(hide_password=False)
    upgrade(url)
    return url


async def _recreate_postgres(admin: Any, database: str) -> None:
    dsn = admin.set(drivername="postgresql").render_as_string(hide_password=False)
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        await conn.execute(f'CREATE DATABASE "{database}"')
    finally:
        await conn.close()


def webhook_settings(
    data_dir: Path, database_url: str, identity: Identity, **overrides: Any
) -> Settings:
    values: dict[str, Any] = {
        "webhook_allowed_networks": ["127.0.0.0/8"],
        "webhook_ca_bundle": identity.ca_path,
        "webhook_retry_schedule": list(SCHEDULE),
        "webhook_timeout": TIMEOUT,
        "sweep_interval": 0.1,
        **overrides,
    }
    return test_settings(data_dir, database_url, **values)


@contextlib.contextmanager
def webhook_server(
    data_dir: Path, database_url: str, identity: Identity, **overrides: Any
) -> Iterator[RunningServer]:
    settings = webhook_settings(data_dir, database_url, identity, **overrides)
    with ServerThread(settings) as running:
        yield running


def wait_until(
    condition: Any, *, timeout: float = 10.0, what: str = "condition", interval: float = 0.01
) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(interval)


def events_of(api: httpx.Client, related: str) -> list[dict[str, Any]]:
    """The events about one object, oldest first."""
    response = api.get("/v1/events", params={"related": related, "limit": 100})
    assert response.status_code == 200, response.text
    data: list[dict[str, Any]] = response.json()["data"]
    return list(reversed(data))


def settled(api: httpx.Client, related: str, count: int) -> list[dict[str, Any]]:
    """Wait until `count` events about `related` exist and none is still pending."""
    found: list[dict[str, Any]] = []

    def done() -> bool:
        found[:] = events_of(api, related)
        return len(found) >= count and all(e["delivery_status"] != "pending" for e in found)

    # Polled gently: the server under test is also the one delivering.
    # The longest case, a receiver that never answers, takes 4 timeouts plus the schedule.
    wait_until(done, timeout=60, what=f"{count} settled events for {related}", interval=0.05)
    return found


def number(i: int) -> str:
    """Distinct valid numbers: one pending verification per number is the rule."""
    return f"+1415555{i % 10000:04d}"


async def record_events(services: Services, url: str, count: int) -> tuple[str, list[str]]:
    """An account, and `count` deliverable events for it written straight to the outbox."""
    account = await services.accounts.create_account("Workers")
    now = datetime.now(UTC)
    made = [
        NewEvent(new_id("evt"), EventType.VERIFICATION_SENT, now, False, {"n": i})
        for i in range(count)
    ]

    async def work(tx: Tx) -> None:
        for event in made:
            await event_store.record(
                tx, event, account_id=account.id, related_id=new_id("ver"), webhook_url=url
            )

    await services.db.write(work)
    # The events are test events (livemode false): the test secret signs them.
    return account.test_webhook_secret, [event.id for event in made]
