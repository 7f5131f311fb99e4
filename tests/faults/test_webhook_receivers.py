"""Webhook receivers that hang, reset connections or answer slowly hold at most their
own endpoints' share of delivery slots: another endpoint's events arrive as fast as
if they were not there.

`relay serve` runs as a process with 8 delivery slots, 2 per endpoint, and a
deadline far beyond the test, so a hanging attempt holds its slot throughout.
Each receiver is an endpoint of its own (a port of its own on 127.0.0.1).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.relay_process import RelayProcess, eventually
from tests.webhooks.receiver import Identity, Receiver, isolated_database, running_receiver

SLOTS, PER_ENDPOINT = 8, 2
EACH = 6  # verifications per endpoint, two events each (sent, delivered)
# Far below the 60 s deadline a hanging attempt would wait out; on an idle machine
# the healthy endpoint's events arrive in well under a second.
HEALTHY_WITHIN = 5.0


@contextlib.contextmanager
def resetting_receiver() -> Iterator[tuple[str, list[float]]]:
    """Accepts each connection and resets it at once (RST, not FIN)."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    resets: list[float] = []
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                connection, _ = server.accept()
            except TimeoutError:
                continue
            connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            connection.close()
            resets.append(time.monotonic())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.getsockname()[1]}/reset", resets
    finally:
        done.set()
        thread.join(timeout=5)
        server.close()


@pytest.fixture
def relay(tmp_path: Path, database_url: str, identity: Identity) -> Iterator[RelayProcess]:
    process = RelayProcess(
        tmp_path,
        isolated_database(database_url, "faults_hooks", tmp_path),
        RELAY_WEBHOOK_ALLOWED_NETWORKS="127.0.0.0/8",
        RELAY_WEBHOOK_CA_BUNDLE=str(identity.ca_path),
        RELAY_WEBHOOK_TIMEOUT="60",
        RELAY_WEBHOOK_RETRY_SCHEDULE="0.2,0.4,0.8",
        RELAY_WEBHOOK_CONCURRENCY=str(SLOTS),
        RELAY_WEBHOOK_ENDPOINT_CONCURRENCY=str(PER_ENDPOINT),
        # The hanging attempts are still in flight when the test stops the server.
        RELAY_SHUTDOWN_TIMEOUT="1",
    )
    try:
        yield process
    finally:
        process.stop()


@pytest.mark.slow
async def test_hanging_resetting_and_slow_receivers_do_not_delay_another_endpoint(
    relay: RelayProcess, identity: Identity, receiver: Receiver
) -> None:
    key = (await asyncio.to_thread(relay.account))["test_key"]
    await asyncio.to_thread(relay.start)
    with (
        running_receiver(identity) as hanging,
        running_receiver(identity) as slow,
        resetting_receiver() as (reset_url, resets),
    ):
        bad = [hanging.url("/hang"), slow.url("/late"), reset_url]
        async with relay.client(key, timeout=30) as client:
            n = 0
            for url in bad:
                for _ in range(EACH):
                    n += 1
                    body = {"to": f"+1415557{n:04d}", "webhook_url": url}
                    made = await client.post("/v1/verifications", json=body)
                    assert made.status_code == 200, made.text
            # The bad endpoints' first attempts are under way and hold their slots.
            await eventually(
                lambda: len(hanging.requests("/hang")) >= PER_ENDPOINT and len(resets) >= 1,
                within=10,
                what="the bad endpoints' first attempts",
            )
            created: dict[str, float] = {}
            for _ in range(EACH):
                n += 1
                body = {"to": f"+1415557{n:04d}", "webhook_url": receiver.url("/ok")}
                made = await client.post("/v1/verifications", json=body)
                assert made.status_code == 200, made.text
                created[made.json()["id"]] = time.monotonic()

            def all_arrived() -> bool:
                ids = {r.event["data"]["object"]["id"] for r in receiver.requests("/ok")}
                return len(receiver.requests("/ok")) >= 2 * EACH and ids >= set(created)

            await eventually(all_arrived, within=30, what="the healthy endpoint's events")
            hung_at_the_end = len(hanging.requests("/hang"))
            slow_in_flight = len(slow.requests("/late")) - len(slow.answered)

    late = [
        request.arrived - created[request.event["data"]["object"]["id"]]
        for request in receiver.requests("/ok")
    ]
    print(f"healthy endpoint: slowest event {max(late):.2f} s after its create")
    assert max(late) < HEALTHY_WITHIN, late
    # The bad endpoints never held more than their share.
    assert hung_at_the_end == PER_ENDPOINT
    assert slow_in_flight <= PER_ENDPOINT
    assert len(resets) >= 1
