"""A receipt that arrives before its submit has been recorded is applied, not lost."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import pytest_asyncio

from relay.accounts.models import Caller
from relay.carriers.base import DeliveryReport, OutboundSms, ReportSink, SubmitReceipt
from relay.db.sql import Sql
from relay.delivery import early_reports, usage
from relay.messages.models import Message
from relay.messages.service import SendRequest
from relay.services import Services, build_services
from tests.harness import test_settings
from tests.webhooks.receiver import isolated_database


class ScriptedCarrier:
    """A carrier whose receipt reaches the sink before `submit` returns (the SMSC race)."""

    def __init__(self, *, early: bool) -> None:
        self.early = early
        self.sink: ReportSink | None = None
        self.submitted: list[str] = []

    @property
    def name(self) -> str:
        return "scripted"

    async def start(self, reports: ReportSink) -> None:
        self.sink = reports

    async def submit(self, sms: OutboundSms) -> SubmitReceipt:
        message_id = f"smsc-{sms.attempt_id}"
        self.submitted.append(message_id)
        if self.early:
            assert self.sink is not None
            await self.sink(report(message_id))
        return SubmitReceipt(carrier_message_id=message_id)

    async def close(self) -> None:
        self.sink = None


PARKED = Sql("SELECT count(*) AS n FROM early_reports")


def report(message_id: str) -> DeliveryReport:
    return DeliveryReport("scripted", message_id, "delivered", None, datetime.now(UTC))


@pytest_asyncio.fixture
async def services(tmp_path: Path, database_url: str) -> AsyncIterator[Services]:
    url = await asyncio.to_thread(isolated_database, database_url, "early_receipts", tmp_path)
    settings = test_settings(
        tmp_path,
        url,
        carriers={"scripted": {"kind": "sandbox"}},
        routes={"default": ["scripted"]},
    )
    built = build_services(settings)
    try:
        yield built
    finally:
        await built.close()


async def live_caller(services: Services) -> Caller:
    account = await services.accounts.create_account("Acme")
    return await services.accounts.authenticate(account.live_key)


def scripted(services: Services, *, early: bool) -> ScriptedCarrier:
    """Put a ScriptedCarrier where the route's carrier was."""
    carrier = ScriptedCarrier(early=early)
    services.delivery.carriers.carriers["scripted"] = carrier
    return carrier


async def send(services: Services, caller: Caller, to: str) -> Message:
    request = SendRequest(to=to, code="123456", locale="en", metadata={}, webhook_url=None)
    return await services.messages.send(caller, request)


async def parked(services: Services) -> int:
    row = await services.db.read(lambda tx: tx.fetchrow(PARKED))
    assert row is not None
    return int(row["n"])


@pytest.mark.asyncio
async def test_a_receipt_before_the_submit_is_recorded_is_parked_then_applied(
    services: Services,
) -> None:
    scripted(services, early=True)
    await services.delivery.start(dispatch=True)
    caller = await live_caller(services)

    message = await send(services, caller, "+14155550199")

    assert message.status.value == "delivered"
    assert [a.status.value for a in message.attempts] == ["delivered"]
    assert await parked(services) == 0


@pytest.mark.asyncio
async def test_a_receipt_parked_while_another_process_recorded_the_submit_is_applied_later(
    services: Services,
) -> None:
    carrier = scripted(services, early=False)
    await services.delivery.start(dispatch=True)
    caller = await live_caller(services)
    message = await send(services, caller, "+14155550198")
    assert message.status.value == "sent"
    # The receipt's transaction missed the recorded id (read before the other commit).
    now = datetime.now(UTC)
    await services.db.write(
        lambda tx: early_reports.park(tx, report(carrier.submitted[-1]), now=now)
    )

    assert await services.delivery.apply_early_reports() == 0
    after = await services.messages.retrieve(caller, message.id)
    assert after.status.value == "delivered"
    assert await parked(services) == 0


@pytest.mark.asyncio
async def test_a_second_receipt_for_the_same_sms_changes_nothing(services: Services) -> None:
    carrier = scripted(services, early=False)
    await services.delivery.start(dispatch=True)
    caller = await live_caller(services)
    message = await send(services, caller, "+14155550197")
    await services.delivery.on_report(report(carrier.submitted[-1]))
    await services.delivery.on_report(report(carrier.submitted[-1]))

    after = await services.messages.retrieve(caller, message.id)
    assert [a.status.value for a in after.attempts] == ["delivered"]
    totals = await services.db.read(lambda tx: usage.usage_totals(tx, account_id=caller.account_id))
    assert totals == {"delivered": 1}


@pytest.mark.asyncio
async def test_an_attempt_leased_by_a_dead_process_is_sent_by_another(
    services: Services,
) -> None:
    carrier = scripted(services, early=False)
    caller = await live_caller(services)
    # This process does not send: the attempt stays queued, as if its sender had died.
    message = await send(services, caller, "+14155550196")
    assert [a.status.value for a in message.attempts] == ["queued"]
    assert carrier.submitted == []

    await services.delivery.start(dispatch=True)
    [job] = await services.delivery.claim(limit=10, busy=[])
    await services.delivery.dispatch(job)

    assert len(carrier.submitted) == 1
    after = await services.messages.retrieve(caller, message.id)
    assert [a.status.value for a in after.attempts] == ["sent"]
    assert await services.delivery.claim(limit=10, busy=[]) == []
