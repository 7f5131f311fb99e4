"""An SMSC that drops the connection with submits in flight, or answers
ESME_RTHROTTLED: every message is still delivered (confirmed, retried or failed
over), none is dropped, and no SMSC accepts the same message twice.

`relay serve` runs as a process with the route `first, second`, both real SMSCs
(node-smpp, tests/carriers/smpp_peer.py) that report every PDU they see.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from tests.carriers.reading import attempts, settle
from tests.carriers.smpp_peer import SmppPeer
from tests.faults.relay_process import (
    DELIVERED,
    ESME_RTHROTTLED,
    RelayProcess,
    smpp_carrier,
)
from tests.webhooks.receiver import isolated_database

IN_FLIGHT = 4
_numbers = itertools.count(3000)


@pytest_asyncio.fixture
async def second(peer_dir: Path) -> AsyncIterator[SmppPeer]:
    peer = await SmppPeer.start(peer_dir, receipt=DELIVERED)
    try:
        yield peer
    finally:
        await peer.stop()


@pytest.fixture
def relay(
    tmp_path: Path, database_url: str, smsc: SmppPeer, second: SmppPeer
) -> Iterator[RelayProcess]:
    process = RelayProcess(tmp_path, isolated_database(database_url, "faults_smpp", tmp_path))
    carriers = {"first": smpp_carrier(smsc.port), "second": smpp_carrier(second.port)}
    process.configure(carriers, {"default": ["first", "second"]})
    try:
        yield process
    finally:
        process.stop()


async def create_many(live: httpx.AsyncClient, count: int) -> list[dict[str, Any]]:
    async def one() -> dict[str, Any]:
        to = f"+1415556{next(_numbers) % 10000:04d}"
        response = await live.post("/v1/verifications", json={"to": to})
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    return await asyncio.gather(*(one() for _ in range(count)))


def accepted(peer: SmppPeer, to: str) -> list[str]:
    """Texts of the submits for `to` that `peer` did not refuse: answered 0, or never
    answered (in flight when the connection dropped: the SMSC may have sent them)."""
    refused = {e["message_id"] for e in peer.seen("submit_sm_resp") if e["status"] != 0}
    return [
        str(e["text"])
        for e in peer.seen("submit", destination_addr=to.lstrip("+"))
        if e["message_id"] not in refused
    ]


def delivered_last(body: dict[str, Any]) -> bool:
    return bool(body["attempts"]) and body["attempts"][-1]["status"] == "delivered"


async def settled(live: httpx.AsyncClient, made: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        await settle(live, f"/v1/verifications/{m['id']}", delivered_last, within=20) for m in made
    ]


@pytest.mark.slow
async def test_an_smsc_dropping_the_connection_with_submits_in_flight_loses_and_doubles_none(
    relay: RelayProcess, smsc: SmppPeer, second: SmppPeer
) -> None:
    key = (await asyncio.to_thread(relay.account))["live_key"]
    await asyncio.to_thread(relay.start)
    await smsc.command("configure", submit="hold", drop_at_outstanding=IN_FLIGHT)
    async with relay.client(key, timeout=30) as live:
        creating = asyncio.ensure_future(create_many(live, IN_FLIGHT))
        await smsc.wait_for("drop", within=15)
        await smsc.command("configure", submit="accept", drop_at_outstanding=0)
        made = await creating
        final = await settled(live, made)

    for body in final:
        outcome = attempts(body)
        assert outcome[-1][1] == "delivered", outcome
        texts = accepted(smsc, body["to"]) + accepted(second, body["to"])
        assert len(accepted(smsc, body["to"])) <= 1, (body["to"], outcome)
        assert len(accepted(second, body["to"])) <= 1, (body["to"], outcome)
        assert len(set(texts)) == 1, texts  # one code, wherever it went
    print([attempts(body) for body in final])  # shown with -s: what Relay made of the drop


@pytest.mark.slow
async def test_an_smsc_answering_throttled_gets_each_message_once_it_accepts(
    relay: RelayProcess, smsc: SmppPeer, second: SmppPeer
) -> None:
    key = (await asyncio.to_thread(relay.account))["live_key"]
    await asyncio.to_thread(relay.start)
    await smsc.command("configure", submit="status", status=ESME_RTHROTTLED)
    async with relay.client(key, timeout=30) as live:
        made = await create_many(live, IN_FLIGHT)
        await smsc.wait_for("submit_sm_resp", count=IN_FLIGHT, status=ESME_RTHROTTLED)
        await asyncio.sleep(0.5)  # throttled for a while: several refusals each
        await smsc.command("configure", submit="accept", status=0)
        final = await settled(live, made)

    for body in final:
        assert attempts(body) == [("first", "delivered", None)], body["attempts"]
        assert len(accepted(smsc, body["to"])) == 1
        assert second.seen("submit", destination_addr=body["to"].lstrip("+")) == []
