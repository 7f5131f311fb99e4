"""Delivery workers that race each other or die mid-attempt lose no event and double none."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import ssl
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from relay.clock import OffsetClock
from relay.config import Settings
from relay.events import store as event_store
from relay.events.claims import Capacity, Finished
from relay.events.delivery import DeliveryWorker
from relay.events.store import Claim
from relay.services import Services, build_services
from relay.webhooks import verify
from tests.harness import TEST_CODE_KEY, free_port
from tests.webhooks.receiver import (
    Identity,
    Receiver,
    isolated_database,
    number,
    record_events,
    wait_until,
    webhook_settings,
)

RELAY = [sys.executable, "-m", "relay.cli.main"]


@pytest.fixture
def settings(tmp_path: Path, database_url: str, identity: Identity) -> Settings:
    url = isolated_database(database_url, "workers", tmp_path)
    return webhook_settings(tmp_path, url, identity)


@pytest.fixture
async def pair(settings: Settings) -> AsyncIterator[tuple[Services, Services]]:
    """Two independent processes' worth of services over one database."""
    first, second = build_services(settings), build_services(settings)
    try:
        yield first, second
    finally:
        await first.close()
        await second.close()


async def claim(services: Services, owner: str, limit: int) -> list[Claim]:
    """What the delivery loop claims with `limit` free slots, as `owner`."""
    capacity = Capacity(total=limit, per_endpoint=limit)
    return (await services.events.ledger.claim(owner=owner, capacity=capacity)).claims


async def test_two_workers_claiming_at_the_same_moment_never_take_the_same_delivery(
    pair: tuple[Services, Services], receiver: Receiver
) -> None:
    _, event_ids = await record_events(pair[0], receiver.url("/ok"), 40)

    claimed: list[str] = []
    while True:
        batches = await asyncio.gather(
            *(claim(s, f"w{i}", 3) for i, s in enumerate(pair) for _ in "ab")
        )
        if not any(batches):
            break
        claimed += [claim.event_id for batch in batches for claim in batch]

    assert sorted(claimed) == sorted(event_ids)  # every one, and none twice


async def test_two_delivery_loops_on_one_database_deliver_each_event_exactly_once(
    pair: tuple[Services, Services], receiver: Receiver
) -> None:
    secret, event_ids = await record_events(pair[0], receiver.url("/slow"), 30)
    loops = [asyncio.create_task(DeliveryWorker(s.events, concurrency=4).run()) for s in pair]
    try:
        deadline = time.monotonic() + 20
        while not set(event_ids) <= set(receiver.answered):
            assert time.monotonic() < deadline, "deliveries did not finish"
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.2)  # room for a wrongly doubled delivery to show up
    finally:
        for loop in loops:
            loop.cancel()
        await asyncio.gather(*loops, return_exceptions=True)

    seen = Counter(r.event_id for r in receiver.requests("/slow"))
    assert {event_id: seen[event_id] for event_id in event_ids} == dict.fromkeys(event_ids, 1)
    for request in receiver.requests("/slow"):
        verify(request.body, request.signature, secret)


async def test_a_lease_that_ran_out_is_taken_over_and_the_late_worker_cannot_record(
    settings: Settings, receiver: Receiver
) -> None:
    clock = OffsetClock()
    stuck, rescuer = build_services(settings), build_services(settings, clock=clock)
    try:
        _, [event_id] = await record_events(stuck, receiver.url("/ok"), 1)
        [held] = await claim(stuck, "stuck", 5)
        assert await claim(rescuer, "rescuer", 5) == []

        clock.advance(settings.webhook_timeout + 11)  # past the default lease
        [taken] = await claim(rescuer, "rescuer", 5)

        assert (taken.event_id, taken.number) == (event_id, 2)
        attempt = event_store.AttemptRecord(clock.now(), 200, None, 5)
        assert await stuck.events.ledger.record([Finished(held, attempt, ok=True)]) == [None]
        [recorded] = await rescuer.events.ledger.record([Finished(taken, attempt, ok=True)])
        assert recorded is not None
        found = await rescuer.db.read(lambda tx: event_store.attempts_for(tx, [event_id]))
        api_view = found[event_id]
        assert [(a.status_code, a.error) for a in api_view] == [(None, "worker_lost"), (200, None)]
    finally:
        await stuck.close()
        await rescuer.close()


# --- a real `relay serve`, killed with SIGKILL mid-delivery -----------------------


def start(command: str, env: dict[str, str], port: int) -> subprocess.Popen[str]:
    args = [*RELAY, command] + (["--port", str(port)] if command == "serve" else [])
    return subprocess.Popen(
        args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def wait_ready(base_url: str, cert: Path, process: subprocess.Popen[str]) -> ssl.SSLContext:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stdout.read() if process.stdout else ""
        if cert.exists():
            context = ssl.create_default_context(cafile=os.fspath(cert))
            try:
                if httpx.get(f"{base_url}/healthz", verify=context).status_code == 200:
                    return context
            except httpx.TransportError:
                pass
        time.sleep(0.1)
    raise AssertionError("relay serve did not become ready")


@pytest.fixture
def env(tmp_path: Path, database_url: str, identity: Identity) -> dict[str, str]:
    url = isolated_database(database_url, "crash", tmp_path)
    return {
        **os.environ,
        "RELAY_DATA_DIR": os.fspath(tmp_path / "data"),
        "RELAY_DATABASE_URL": url,
        "RELAY_CODE_KEY": TEST_CODE_KEY,
        "RELAY_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8",
        "RELAY_WEBHOOK_CA_BUNDLE": os.fspath(identity.ca_path),
        "RELAY_WEBHOOK_RETRY_SCHEDULE": "0.05,0.1,0.2",
        "RELAY_WEBHOOK_TIMEOUT": "2",
        "RELAY_WEBHOOK_LEASE": "3",
    }


def create_verifications(
    base_url: str, context: ssl.SSLContext, key: str, url: str, count: int
) -> list[str]:
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=base_url, verify=context, headers=headers) as client:
        made = [
            client.post("/v1/verifications", json={"to": number(7000 + i), "webhook_url": url})
            for i in range(count)
        ]
    assert all(r.status_code == 200 for r in made), [r.text for r in made]
    return [r.json()["id"] for r in made]


def all_events(base_url: str, context: ssl.SSLContext, key: str) -> list[dict[str, Any]]:
    headers = {"Authorization": f"Bearer {key}"}
    response = httpx.get(
        f"{base_url}/v1/events", params={"limit": 100}, verify=context, headers=headers
    )
    assert response.status_code == 200, response.text
    data: list[dict[str, Any]] = response.json()["data"]
    return data


def test_a_server_killed_with_deliveries_in_flight_loses_none_of_its_events(
    env: dict[str, str], receiver: Receiver, tmp_path: Path
) -> None:
    made = subprocess.run(
        [*RELAY, "accounts", "create", "Crash", "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    key = json.loads(made.stdout)["test_key"]
    cert = Path(env["RELAY_DATA_DIR"]) / "tls" / "cert.pem"
    receiver.hanging.set()  # first, every delivery hangs: in flight when the server dies

    port = free_port()
    first = start("serve", env, port)
    try:
        context = wait_ready(f"https://127.0.0.1:{port}", cert, first)
        create_verifications(f"https://127.0.0.1:{port}", context, key, receiver.url("/switch"), 10)
        wait_until(lambda: len(receiver.requests("/switch")) >= 10, what="deliveries in flight")
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=20)
    receiver.hanging.clear()

    port = free_port()
    second = start("serve", env, port)
    try:
        context = wait_ready(f"https://127.0.0.1:{port}", cert, second)
        event_ids = {e["id"] for e in all_events(f"https://127.0.0.1:{port}", context, key)}
        assert len(event_ids) == 20
        wait_until(lambda: event_ids <= set(receiver.answered), timeout=20, what="redelivery")
        events: list[dict[str, Any]] = []

        def recorded() -> bool:
            # The receiver answers a moment before Relay records the answer.
            events[:] = all_events(f"https://127.0.0.1:{port}", context, key)
            return all(e["delivery_status"] == "delivered" for e in events)

        wait_until(recorded, what="delivered events", interval=0.05)
    finally:
        second.terminate()
        second.wait(timeout=20)

    assert {e["delivery_status"] for e in events} == {"delivered"}
    errors = Counter(a["error"] for e in events for a in e["delivery_attempts"])
    assert errors["worker_lost"] >= 1  # in-flight attempts were taken over, not forgotten


def test_relay_worker_delivers_for_a_server_that_leaves_background_work_to_it(
    env: dict[str, str], receiver: Receiver
) -> None:
    env = {**env, "RELAY_SERVE_BACKGROUND": "false"}
    made = subprocess.run(
        [*RELAY, "accounts", "create", "Split", "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    key = json.loads(made.stdout)["test_key"]
    cert = Path(env["RELAY_DATA_DIR"]) / "tls" / "cert.pem"
    port = free_port()
    server = start("serve", env, port)
    try:
        context = wait_ready(f"https://127.0.0.1:{port}", cert, server)
        [verification_id] = create_verifications(
            f"https://127.0.0.1:{port}", context, key, receiver.url("/ok"), 1
        )
        time.sleep(0.5)
        assert not [r for r in receiver.requests("/ok") if verification_id in r.body.decode()]

        worker = start("worker", env, port)
        try:
            wait_until(
                lambda: (
                    sum(verification_id in r.body.decode() for r in receiver.requests("/ok")) == 2
                ),
                timeout=30,
                what="the worker's deliveries",
            )
        finally:
            worker.send_signal(signal.SIGTERM)
            output, _ = worker.communicate(timeout=20)
        assert worker.returncode == 0, output
        assert "Relay worker stopped" in output
    finally:
        server.terminate()
        server.wait(timeout=20)
