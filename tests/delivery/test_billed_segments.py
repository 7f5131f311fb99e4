"""Billed segments: recorded on the attempt a carrier accepted, summed in its usage row.

Two scripted carriers stand where a live route's carriers were, so each test
chooses what they answer: accepted (with or without their own segment count),
refused, or unreachable; receipts are then handed to the delivery layer as a
carrier would.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import pytest_asyncio

from relay.accounts.models import Caller
from relay.carriers.base import (
    CarrierRejected,
    CarrierUnavailable,
    DeliveryReport,
    OutboundSms,
    ReportSink,
    ReportStatus,
    SubmitReceipt,
)
from relay.clock import OffsetClock
from relay.db.sql import Sql
from relay.delivery.usage import usage_rows
from relay.messages.models import Message
from relay.messages.service import SendRequest
from relay.services import Services, build_services
from relay.sms.encoding import segment_count
from tests.harness import test_settings
from tests.webhooks.receiver import isolated_database

pytestmark = pytest.mark.asyncio
_numbers = itertools.count(1400)


class BillingCarrier:
    """Accepts every SMS and bills it `segments` (None: says nothing), or fails as told."""

    def __init__(self, name: str, *, segments: int | None = None, fails: str = "") -> None:
        self._name = name
        self.segments = segments
        self.fails = fails
        self.bodies: list[str] = []

    @property
    def name(self) -> str:
        return self._name

    async def start(self, reports: ReportSink) -> None:
        pass

    async def submit(self, sms: OutboundSms) -> SubmitReceipt:
        if self.fails == "refuse":
            raise CarrierRejected("scripted_refused", "refused")
        if self.fails == "unreachable":
            raise CarrierUnavailable("scripted_unreachable", "no answer")
        self.bodies.append(sms.body)
        return SubmitReceipt(f"{self._name}-{sms.attempt_id}", segments=self.segments)

    async def close(self) -> None:
        pass


ATTEMPTS = Sql(
    "SELECT carrier, status, segments FROM attempts WHERE message_id = :id ORDER BY position"
)


@pytest_asyncio.fixture
async def services(tmp_path: Path, database_url: str) -> AsyncIterator[Services]:
    url = await asyncio.to_thread(isolated_database, database_url, "billed_segments", tmp_path)
    settings = test_settings(
        tmp_path,
        url,
        carriers={"first": {"kind": "sandbox"}, "second": {"kind": "sandbox"}},
        routes={"default": ["first", "second"]},
    )
    built = build_services(settings, clock=OffsetClock())
    await built.delivery.start(dispatch=True)
    try:
        yield built
    finally:
        await built.close()


def carriers(services: Services, first: BillingCarrier, second: BillingCarrier) -> None:
    services.delivery.carriers.carriers.update({"first": first, "second": second})


async def send(services: Services) -> tuple[Caller, Message]:
    account = await services.accounts.create_account("Acme")
    caller = await services.accounts.authenticate(account.live_key)
    to = f"+1415555{next(_numbers):04d}"
    request = SendRequest(to=to, code="123456", locale="en", metadata={}, webhook_url=None)
    return caller, await services.messages.send(caller, request)


async def receipt(services: Services, carrier: str, status: ReportStatus) -> None:
    """The final receipt for the last SMS `carrier` accepted."""
    attempts = await services.db.read(lambda tx: tx.fetch(Sql("SELECT id, carrier FROM attempts")))
    attempt_id = [a["id"] for a in attempts if a["carrier"] == carrier][-1]
    error = None if status == "delivered" else "scripted_undeliverable"
    report = DeliveryReport(carrier, f"{carrier}-{attempt_id}", status, error, datetime.now(UTC))
    await services.delivery.on_report(report)


async def billed(services: Services, message: Message) -> list[tuple[str, str, int | None]]:
    rows = await services.db.read(lambda tx: tx.fetch(ATTEMPTS, {"id": message.id}))
    return [(r["carrier"], r["status"], r["segments"]) for r in rows]


async def usage(services: Services, caller: Caller) -> set[tuple[str, str, int, int]]:
    rows = await services.db.read(lambda tx: usage_rows(tx, account_id=caller.account_id))
    return {(r.carrier, r.outcome, r.count, r.segments) for r in rows}


async def test_a_delivered_sms_bills_the_segments_its_carrier_counted(services: Services) -> None:
    carriers(services, BillingCarrier("first", segments=3), BillingCarrier("second"))
    caller, message = await send(services)
    assert await billed(services, message) == [("first", "sent", 3)]
    # Accepted, but not final yet: nothing is counted before the receipt.
    assert await usage(services, caller) == set()

    await receipt(services, "first", "delivered")
    assert await billed(services, message) == [("first", "delivered", 3)]
    assert await usage(services, caller) == {("first", "delivered", 1, 3)}


async def test_a_carrier_that_does_not_count_is_billed_by_gsm_arithmetic(
    services: Services,
) -> None:
    first = BillingCarrier("first")
    carriers(services, first, BillingCarrier("second"))
    caller, message = await send(services)
    await receipt(services, "first", "delivered")
    expected = segment_count(first.bodies[0])
    assert await billed(services, message) == [("first", "delivered", expected)]
    assert await usage(services, caller) == {("first", "delivered", 1, expected)}


async def test_a_refused_or_unreachable_submit_is_counted_but_bills_nothing(
    services: Services,
) -> None:
    refusing = BillingCarrier("first", fails="refuse")
    carriers(services, refusing, BillingCarrier("second", segments=2))
    caller, message = await send(services)
    await receipt(services, "second", "delivered")
    assert await billed(services, message) == [
        ("first", "failed", None),
        ("second", "delivered", 2),
    ]
    assert await usage(services, caller) == {
        ("first", "carrier_rejected", 1, 0),
        ("second", "delivered", 1, 2),
    }

    carriers(services, BillingCarrier("first", fails="unreachable"), BillingCarrier("second"))
    other, _ = await send(services)
    assert ("first", "carrier_unavailable", 1, 0) in await usage(services, other)


async def test_an_undeliverable_sms_is_billed_all_the_same(services: Services) -> None:
    carriers(services, BillingCarrier("first", segments=2), BillingCarrier("second", segments=1))
    caller, message = await send(services)
    await receipt(services, "first", "failed")
    await receipt(services, "second", "delivered")
    assert await billed(services, message) == [("first", "failed", 2), ("second", "delivered", 1)]
    assert await usage(services, caller) == {
        ("first", "sms_undeliverable", 1, 2),
        ("second", "delivered", 1, 1),
    }


async def test_an_sms_whose_receipt_never_came_is_billed_all_the_same(
    services: Services,
) -> None:
    carriers(services, BillingCarrier("first", segments=4), BillingCarrier("second", segments=1))
    caller, message = await send(services)
    timeout = services.delivery.carriers.receipt_timeout("first", 0)
    assert isinstance(services.clock, OffsetClock)
    services.clock.advance(timeout + 1)
    assert await services.delivery.time_out_reports() == 1
    # The failover attempt on `second` is opened; the timed-out one keeps its bill.
    assert (await billed(services, message))[0] == ("first", "failed", 4)
    assert await usage(services, caller) == {("first", "delivery_report_timeout", 1, 4)}
