"""`relay serve` killed with -9 while SMSs wait on a slow SMSC and webhooks on a
receiver that holds them: after a restart nothing answered is lost, nothing is
created twice under one Idempotency-Key, no number got two different codes, and
every event reaches its webhook.

Relay sends at least once: a submit whose answer was never recorded goes out
again after its lease. That second submit must carry the same code.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from relay.db.driver import open_db
from relay.db.sql import Sql, Tx
from tests.carriers.smpp_peer import SmppPeer
from tests.faults.relay_process import RelayProcess, eventually, smpp_carrier
from tests.webhooks.receiver import Identity, Receiver, isolated_database

FIRST_BATCH = 4  # sent before the kill: their webhooks hang when it comes
SECOND_BATCH = 8  # created while the SMSC holds its answers: in dispatch at the kill


@pytest.fixture
def relay(
    tmp_path: Path, database_url: str, identity: Identity, smsc: SmppPeer
) -> Iterator[RelayProcess]:
    url = isolated_database(database_url, "faults_kill", tmp_path)
    process = RelayProcess(
        tmp_path,
        url,
        RELAY_WEBHOOK_ALLOWED_NETWORKS="127.0.0.0/8",
        RELAY_WEBHOOK_CA_BUNDLE=str(identity.ca_path),
        RELAY_WEBHOOK_RETRY_SCHEDULE="0.1,0.2,0.4,0.8,1",
        RELAY_WEBHOOK_TIMEOUT="2",
        RELAY_WEBHOOK_LEASE="3",
        # A dead process's leases on queued submits and on keys run out quickly.
        RELAY_DISPATCH_LEASE="2",
        RELAY_IDEMPOTENCY_LEASE="3",
    )
    process.configure({"smsc": smpp_carrier(smsc.port)}, {"default": ["smsc"]})
    try:
        yield process
    finally:
        process.stop()


def number(n: int) -> str:
    return f"+1415555{n:04d}"


def code_in(text: str) -> str:
    found = re.search(r"\b(\d{6})\b", text)
    assert found, text
    return found.group(1)


async def create(client: httpx.AsyncClient, n: int, hook: str) -> httpx.Response:
    body = {"to": number(n), "webhook_url": hook}
    return await client.post("/v1/verifications", json=body, headers={"Idempotency-Key": f"k{n}"})


async def retry(client: httpx.AsyncClient, n: int, hook: str) -> httpx.Response:
    """As a client does: a key still held by the dead process's request answers 409
    until its claim lapses; then the retry is answered with what that request made."""
    for _ in range(100):
        response = await create(client, n, hook)
        if response.status_code != 409:
            return response
        assert response.json()["error"]["code"] == "idempotency_key_in_use", response.text
        await asyncio.sleep(0.2)
    raise AssertionError(f"key k{n} stayed in use")


async def verifications_per_number(url: str) -> dict[str, int]:
    db = open_db(url)

    async def count(tx: Tx) -> dict[str, int]:
        rows = await tx.fetch(
            Sql("SELECT to_number, count(*) AS n FROM verifications GROUP BY to_number")
        )
        return {str(row["to_number"]): int(row["n"]) for row in rows}

    try:
        return await db.read(count)
    finally:
        await db.close()


async def all_events(client: httpx.AsyncClient) -> list[dict[str, Any]]:
    response = await client.get("/v1/events", params={"limit": 100})
    assert response.status_code == 200, response.text
    data: list[dict[str, Any]] = response.json()["data"]
    return data


@pytest.mark.slow
async def test_relay_killed_mid_dispatch_and_mid_webhook_loses_and_doubles_nothing(
    relay: RelayProcess, smsc: SmppPeer, receiver: Receiver
) -> None:
    key = (await asyncio.to_thread(relay.account))["live_key"]
    hook = receiver.url("/switch")
    receiver.hanging.set()
    await asyncio.to_thread(relay.start)
    answered: dict[int, httpx.Response] = {}
    async with relay.client(key, timeout=30) as client:
        for n in range(FIRST_BATCH):
            answered[n] = await create(client, n, hook)
        await eventually(
            lambda: len(receiver.requests("/switch")) >= FIRST_BATCH,
            within=15,
            what="webhooks held by the receiver",
        )
        await smsc.command("configure", submit="hold")
        second = range(FIRST_BATCH, FIRST_BATCH + SECOND_BATCH)
        pending = {n: asyncio.ensure_future(create(client, n, hook)) for n in second}
        await smsc.wait_for("submit", count=FIRST_BATCH + SECOND_BATCH, within=15)
        await asyncio.to_thread(relay.kill)
        for n, task in pending.items():
            # Unanswered ones the client retries below, with the same key.
            with contextlib.suppress(httpx.TransportError):
                answered[n] = await task
    assert all(r.status_code == 200 for r in answered.values()), relay.output()
    assert len(answered) < FIRST_BATCH + SECOND_BATCH, "the kill found no create in flight"

    await smsc.command("configure", submit="accept")
    receiver.hanging.clear()
    await asyncio.to_thread(relay.start)
    async with relay.client(key, timeout=30) as client:
        retried = {n: await retry(client, n, hook) for n in range(FIRST_BATCH + SECOND_BATCH)}
        for n, first in answered.items():
            again = retried[n]
            assert again.headers.get("idempotent-replayed") == "true", again.text
            assert again.content == first.content
            found = await client.get(f"/v1/verifications/{first.json()['id']}")
            assert found.status_code == 200, found.text
        assert all(r.status_code == 200 for r in retried.values()), [
            r.text for r in retried.values()
        ]
        ids = {r.json()["id"] for r in retried.values()}
        assert len(ids) == FIRST_BATCH + SECOND_BATCH

        async def delivered() -> bool:
            events = await all_events(client)
            return all(e["delivery_status"] == "delivered" for e in events) and {
                e["type"] for e in events
            } >= {"verification.sent", "verification.delivered"}

        await eventually(delivered, within=25, what="every event delivered", every=0.2)
        events = await all_events(client)

    per_number = await verifications_per_number(relay.env["RELAY_DATABASE_URL"])
    assert per_number == {number(n): 1 for n in range(FIRST_BATCH + SECOND_BATCH)}
    for n in range(FIRST_BATCH + SECOND_BATCH):
        codes = {code_in(s["text"]) for s in smsc.seen("submit", destination_addr=number(n)[1:])}
        assert len(codes) == 1, (number(n), codes)
    for event in events:
        assert event["id"] in receiver.answered
    sent = [e for e in events if e["type"] == "verification.sent"]
    assert len({e["data"]["object"]["id"] for e in sent}) == FIRST_BATCH + SECOND_BATCH
    # The held submits went out again after the restart: the case where a second code
    # could have been made.
    held = [number(n)[1:] for n in range(FIRST_BATCH, FIRST_BATCH + SECOND_BATCH)]
    assert all(len(smsc.seen("submit", destination_addr=to)) >= 2 for to in held)
