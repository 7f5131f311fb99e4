"""Failover end to end: Relay over HTTPS, live routes to two real SMSCs (node-smpp).

`first` and `second` are the default route, in that order; `locked` refuses
every bind (wrong password) and heads the GB route. Each test scripts the
peers, sends through the API and reads back the attempts and events.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from tests.carriers.live_client import live_client
from tests.carriers.reading import attempts, event_types, settle
from tests.carriers.smpp_peer import SmppPeer
from tests.harness import RunningServer, ServerThread, test_settings
from tests.webhooks.receiver import isolated_database

pytestmark = pytest.mark.asyncio(loop_scope="module")

ESME_RSUBMITFAIL, ESME_RTHROTTLED = 0x45, 0x58
RECEIPT_TIMEOUT = 3.0  # seconds; a loaded CI machine must not miss a real receipt
DELIVERED = {"stat": "DELIVRD", "form": "tlv"}
_numbers = itertools.count(2000)


def number() -> str:
    return f"+1415557{next(_numbers) % 10000:04d}"


@dataclass
class Smscs:
    first: SmppPeer
    second: SmppPeer
    locked: SmppPeer

    async def reset(self) -> None:
        for peer in (self.first, self.second):
            await peer.command("configure", submit="accept", status=0, receipt=DELIVERED)


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def smscs(peer_dir: Path) -> AsyncIterator[Smscs]:
    first = await SmppPeer.start(peer_dir, receipt=DELIVERED)
    second = await SmppPeer.start(peer_dir, receipt=DELIVERED)
    locked = await SmppPeer.start(peer_dir, password="other")
    try:
        yield Smscs(first, second, locked)
    finally:
        for peer in (first, second, locked):
            await peer.stop()


def smpp(peer: SmppPeer) -> dict[str, Any]:
    return peer.carrier_table(throttle_retry_after=0.3, receipt_timeout=RECEIPT_TIMEOUT)


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, database_url: str, smscs: Smscs
) -> Iterator[RunningServer]:
    url = isolated_database(database_url, "failover", tmp_path_factory.mktemp("db"))
    settings = test_settings(
        tmp_path_factory.mktemp("data"),
        url,
        carriers={
            "first": smpp(smscs.first),
            "second": smpp(smscs.second),
            "locked": smpp(smscs.locked),
        },
        routes={"default": ["first", "second"], "GB": ["locked", "second"]},
    )
    with ServerThread(settings) as running:
        yield running


@pytest_asyncio.fixture(loop_scope="module")
async def live(server: RunningServer, smscs: Smscs) -> AsyncIterator[httpx.AsyncClient]:
    await smscs.reset()
    async with live_client(server) as client:
        yield client


async def create(live: httpx.AsyncClient, to: str | None = None) -> dict[str, Any]:
    response = await live.post("/v1/verifications", json={"to": to or number()})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def last_delivered(body: dict[str, Any]) -> bool:
    return bool(body["attempts"]) and body["attempts"][-1]["status"] == "delivered"


async def test_a_refused_submit_fails_over_to_the_second_smsc(
    live: httpx.AsyncClient, smscs: Smscs
) -> None:
    await smscs.first.command("configure", submit="status", status=ESME_RSUBMITFAIL)
    created = await create(live)
    body = await settle(live, f"/v1/verifications/{created['id']}", last_delivered)
    assert attempts(body) == [
        ("first", "failed", "carrier_rejected"),
        ("second", "delivered", None),
    ]
    assert body["attempts"][0]["error"]["carrier_code"] == "smpp_0x00000045"
    assert await event_types(live, created["id"]) == [
        "verification.failed",
        "verification.sent",
        "verification.delivered",
    ]


async def test_a_silent_smsc_fails_over_once_its_receipt_is_overdue(
    live: httpx.AsyncClient, smscs: Smscs
) -> None:
    await smscs.first.command("configure", receipt=None)
    created = await create(live)
    assert attempts(created) == [("first", "sent", None)]
    body = await settle(live, f"/v1/verifications/{created['id']}", last_delivered)
    assert attempts(body) == [
        ("first", "failed", "delivery_report_timeout"),
        ("second", "delivered", None),
    ]
    assert await event_types(live, created["id"]) == [
        "verification.sent",
        "verification.failed",
        "verification.sent",
        "verification.delivered",
    ]
    # The same code went to both SMSCs.
    to = created["to"].lstrip("+")
    texts = [p.seen("submit", destination_addr=to)[-1]["text"] for p in (smscs.first, smscs.second)]
    assert texts[0] == texts[1]


async def test_an_undeliverable_receipt_fails_over(live: httpx.AsyncClient, smscs: Smscs) -> None:
    await smscs.first.command(
        "configure", receipt={"stat": "UNDELIV", "err": "012", "form": "text"}
    )
    created = await create(live)
    body = await settle(live, f"/v1/verifications/{created['id']}", last_delivered)
    assert attempts(body) == [
        ("first", "failed", "sms_undeliverable"),
        ("second", "delivered", None),
    ]
    assert body["attempts"][0]["error"]["carrier_code"] == "UNDELIV:012"


async def test_an_smsc_that_refuses_the_bind_is_skipped_for_the_next(
    live: httpx.AsyncClient, smscs: Smscs
) -> None:
    created = await create(live, "+447400123456")
    body = await settle(live, f"/v1/verifications/{created['id']}", last_delivered)
    assert attempts(body) == [
        ("locked", "failed", "carrier_unavailable"),
        ("second", "delivered", None),
    ]
    assert smscs.locked.seen("bind", ok=False)


async def test_a_receipt_that_overtakes_its_submit_response_is_not_lost(
    live: httpx.AsyncClient, smscs: Smscs
) -> None:
    await smscs.first.command("configure", receipt={**DELIVERED, "before_resp": True})
    created = await create(live)
    body = await settle(live, f"/v1/verifications/{created['id']}", last_delivered)
    assert attempts(body) == [("first", "delivered", None)]


async def test_throttling_waits_on_the_same_smsc_instead_of_failing(
    live: httpx.AsyncClient, smscs: Smscs
) -> None:
    await smscs.first.command("configure", submit="status", status=ESME_RTHROTTLED)
    created = await create(live)
    assert attempts(created) == [("first", "queued", None)]
    await asyncio.sleep(0.5)
    await smscs.first.command("configure", submit="accept", status=0)
    body = await settle(live, f"/v1/verifications/{created['id']}", last_delivered)
    assert attempts(body) == [("first", "delivered", None)]
    assert len(smscs.second.seen("submit", destination_addr=created["to"].lstrip("+"))) == 0


async def test_failover_stops_at_the_end_of_the_route(
    live: httpx.AsyncClient, smscs: Smscs
) -> None:
    for peer in (smscs.first, smscs.second):
        await peer.command("configure", submit="status", status=ESME_RSUBMITFAIL)
    created = await create(live)
    assert attempts(created) == [
        ("first", "failed", "carrier_rejected"),
        ("second", "failed", "carrier_rejected"),
    ]
    assert created["status"] == "pending"


async def test_a_message_is_delivered_over_smpp(live: httpx.AsyncClient, smscs: Smscs) -> None:
    response = await live.post("/v1/messages", json={"to": number(), "code": "K7Q2P9"})
    assert response.status_code == 200, response.text
    sent = response.json()
    body = await settle(live, f"/v1/messages/{sent['id']}", lambda b: b["status"] == "delivered")
    assert attempts(body) == [("first", "delivered", None)]
    submit = smscs.first.seen("submit", destination_addr=sent["to"].lstrip("+"))[-1]
    assert "K7Q2P9" in submit["text"]
    assert submit["registered_delivery"] == 1
