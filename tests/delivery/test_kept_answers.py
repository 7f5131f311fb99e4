"""A keyed create through a carrier that needs the network: its answer is the verification
once the carrier has answered, and that answer is kept in the unit that records the
carrier's answer, not in a unit of its own.

The creating unit takes the key in progress, with the verification's path; the SMS is
submitted after its commit; the unit that records what the carrier answered keeps the
answer the client then gets, byte for byte. Meanwhile a retry under the key is told
the key is in use; afterwards it is replayed, and nothing is submitted again.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from relay.carriers.base import CarrierRejected, OutboundSms, ReportSink, SubmitReceipt
from relay.services import Services, build_services
from relay.web.app import create_app
from tests.db.test_query_counts import committed
from tests.db.test_round_trips import KEY, SEND_READ, listed
from tests.harness import test_settings
from tests.webhooks.receiver import isolated_database


class HeldCarrier:
    """A carrier over the network, as far as Relay can tell: it answers `submit` only when
    the test lets it, and takes the SMS or refuses it."""

    def __init__(self) -> None:
        self.submitted: list[OutboundSms] = []
        self.release = asyncio.Event()
        self.release.set()
        self.waiting = asyncio.Event()
        self.refuse = False

    @property
    def name(self) -> str:
        return "held"

    @property
    def channel(self) -> str:
        return "sms"

    async def start(self, reports: ReportSink) -> None:
        return None

    async def submit(self, sms: OutboundSms) -> SubmitReceipt:
        self.submitted.append(sms)
        self.waiting.set()
        await self.release.wait()
        if self.refuse:
            raise CarrierRejected("rejected", "The route refused this number.")
        return SubmitReceipt(carrier_message_id=f"held-{sms.attempt_id}")

    async def close(self) -> None:
        return None


@pytest_asyncio.fixture
async def services(tmp_path: Path, database_url: str) -> AsyncIterator[Services]:
    url = await asyncio.to_thread(isolated_database, database_url, "kept_answers", tmp_path)
    settings = test_settings(
        tmp_path, url, carriers={"held": {"kind": "sandbox"}}, routes={"default": ["held"]}
    )
    built = build_services(settings)
    built.delivery.carriers.carriers["held"] = HeldCarrier()
    await built.delivery.start(dispatch=True)
    # Keys kept from their first request, as the app's start-up arranges.
    await built.accounts.start()
    try:
        yield built
    finally:
        await built.close()


def held(services: Services) -> HeldCarrier:
    carrier = services.delivery.carriers.carriers["held"]
    assert isinstance(carrier, HeldCarrier)
    return carrier


@pytest_asyncio.fixture
async def client(services: Services) -> AsyncIterator[httpx.AsyncClient]:
    account = await services.accounts.create_account("Acme")
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=create_app(services)),
        base_url="https://relay.test",
        headers={"Authorization": f"Bearer {account.live_key}"},
    ) as made:
        # The API key is known from here on, as it is in production.
        await create(made, "+14155550199", str(uuid.uuid4()))
        yield made


async def create(client: httpx.AsyncClient, to: str, key: str) -> httpx.Response:
    return await client.post("/v1/verifications", json={"to": to}, headers={"Idempotency-Key": key})


@pytest.mark.asyncio
async def test_the_answer_is_kept_in_the_unit_that_records_the_carriers_answer(
    services: Services, client: httpx.AsyncClient
) -> None:
    with listed(services) as statements, committed(services) as commits:
        first = await create(client, "+14155550101", "network-1")
    assert first.status_code == 200, first.text
    assert [a["status"] for a in first.json()["attempts"]] == ["sent"]
    creating = [
        SEND_READ,
        KEY,
        "INSERT verifications",
        "INSERT attempts",
        "INSERT abuse_counters",
    ]
    # The receipt that may have come first, the owner, its event, the answer.
    recording = [
        "UPDATE attempts",
        "DELETE early_reports",
        "SELECT attempts, verifications",
        "INSERT events",
        KEY,
    ]
    assert statements == creating + recording
    assert commits == [2]

    again = await create(client, "+14155550101", "network-1")
    assert again.headers["idempotent-replayed"] == "true"
    assert again.content == first.content
    assert len(held(services).submitted) == 2  # the warm-up's and this one's


@pytest.mark.asyncio
async def test_a_refused_submit_is_the_answer_kept(
    services: Services, client: httpx.AsyncClient
) -> None:
    held(services).refuse = True
    first = await create(client, "+14155550102", "network-2")
    assert first.status_code == 200, first.text
    assert [a["status"] for a in first.json()["attempts"]] == ["failed"]
    again = await create(client, "+14155550102", "network-2")
    assert again.headers["idempotent-replayed"] == "true"
    assert again.content == first.content


@pytest.mark.asyncio
async def test_a_retry_while_the_carrier_has_not_answered_is_told_the_key_is_in_use(
    services: Services, client: httpx.AsyncClient
) -> None:
    carrier = held(services)
    carrier.release.clear()
    carrier.waiting.clear()
    first = asyncio.ensure_future(create(client, "+14155550103", "network-3"))
    await carrier.waiting.wait()
    busy = await create(client, "+14155550103", "network-3")
    assert busy.status_code == 409
    assert busy.json()["error"]["code"] == "idempotency_key_in_use"
    carrier.release.set()
    answered = await first
    again = await create(client, "+14155550103", "network-3")
    assert again.headers["idempotent-replayed"] == "true"
    assert again.content == answered.content
    assert len(carrier.submitted) == 2
