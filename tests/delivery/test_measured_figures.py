"""The last hour's figures per carrier and country, as measured routes read them from the
attempts table (on SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest
import pytest_asyncio

from relay.accounts.models import Caller
from relay.carriers import measured
from relay.carriers.measured import Figures
from relay.clock import OffsetClock
from relay.db.sql import Sql, moment
from relay.delivery import figures
from relay.messages.service import SendRequest
from relay.services import Services, build_services
from relay.verifications.service import CreateRequest
from tests.harness import test_settings
from tests.webhooks.receiver import isolated_database

pytestmark = pytest.mark.asyncio

# What a carrier's answers would have written; the sandbox delivers everything live.
FAIL = Sql(
    "UPDATE attempts SET status = 'failed', error = :error WHERE message_id = :owner"
    " OR verification_id = :owner"
)
TOOK = Sql("UPDATE attempts SET updated_at = :at WHERE message_id = :owner")


@pytest_asyncio.fixture
async def services(tmp_path: Path, database_url: str) -> AsyncIterator[Services]:
    url = await asyncio.to_thread(isolated_database, database_url, "figures", tmp_path)
    settings = test_settings(
        tmp_path,
        url,
        carriers={"near": {"kind": "sandbox"}, "far": {"kind": "sandbox"}},
        routes={"FR": ["near"], "default": ["far"]},
    )
    built = build_services(settings, clock=OffsetClock())
    await built.delivery.start(dispatch=True)
    try:
        yield built
    finally:
        await built.close()


async def caller(services: Services, *, live: bool) -> Caller:
    account = await services.accounts.create_account("Acme")
    return await services.accounts.authenticate(account.live_key if live else account.test_key)


async def send(services: Services, caller: Caller, to: str) -> str:
    request = SendRequest(to=to, code="123456", locale="en", metadata={}, webhook_url=None)
    return (await services.messages.send(caller, request)).id


async def verify(services: Services, caller: Caller, to: str) -> str:
    request = CreateRequest(
        to=to, locale="en", code_length=6, ttl=600, metadata={}, webhook_url=None
    )
    return (await services.verifications.create(caller, request)).id


async def fail(services: Services, owner: str, code: str) -> None:
    error = {"code": code}
    await services.db.write(lambda tx: tx.execute(FAIL, {"owner": owner, "error": error}))


async def read(
    services: Services, *, shift: timedelta = timedelta(0)
) -> dict[tuple[str, str], Figures]:
    since, until = measured.window(services.clock.now() + timedelta(minutes=1) + shift)
    rows = await services.db.read(lambda tx: figures.read(tx, since=since, until=until))
    return measured.tally(rows)


async def test_live_final_attempts_of_the_hour_count_by_carrier_and_country(
    services: Services,
) -> None:
    live = await caller(services, live=True)
    slow = await send(services, live, "+33612345671")
    await send(services, live, "+33612345672")
    await fail(services, await send(services, live, "+33612345673"), "sms_undeliverable")
    await fail(services, await verify(services, live, "+33612345674"), "carrier_rejected")
    await fail(services, await send(services, live, "+33612345675"), "send_canceled")
    await fail(services, await send(services, live, "+33612345676"), "carrier_not_configured")
    approved = await verify(services, live, "+14155550123")
    await verify(services, live, "+14155550124")
    code = re.search(r"\d{6}", services.sandbox.sent[-2].body)
    assert code is not None
    await services.verifications.check(live, code=code.group(), verification_id=approved)
    await send(services, await caller(services, live=False), "+15005550006")
    row = await services.db.read(
        lambda tx: tx.fetchrow(Sql("SELECT at FROM attempts WHERE message_id = :m"), {"m": slow})
    )
    assert row is not None
    took = moment(row["at"]) + timedelta(seconds=7)
    await services.db.write(lambda tx: tx.execute(TOOK, {"owner": slow, "at": took}))

    # A minute later than the next window: the 7 s receipt has ended in it whatever
    # second of the minute the test runs at.
    assert await read(services, shift=timedelta(minutes=1)) == {
        # Canceled and unconfigured attempts say nothing about the carrier; 7 s and 0 s.
        ("near", "FR"): Figures(4, 2, median_seconds=3.5, p95_seconds=7),
        # Two verifications delivered, one of them approved.
        ("far", "US"): Figures(2, 2, 0.0, p95_seconds=0, verified=2, approved=1),
    }


async def test_attempts_opened_before_the_hour_or_ended_after_it_are_left_out(
    services: Services,
) -> None:
    live = await caller(services, live=True)
    await send(services, live, "+33612345677")
    assert await read(services, shift=timedelta(minutes=-1)) == {}
    assert await read(services, shift=timedelta(hours=1)) == {}
    assert await read(services, shift=timedelta(minutes=59)) == {
        ("near", "FR"): Figures(1, 1, 0.0, p95_seconds=0)
    }


async def test_figures_are_read_again_only_when_the_minute_changes(services: Services) -> None:
    recent = services.delivery.measured.figures
    live = await caller(services, live=True)
    clock = services.clock
    assert isinstance(clock, OffsetClock)
    clock.advance(61 - clock.now().second)
    before = await recent.current()
    await send(services, live, "+33612345678")
    assert await recent.current() is before
    clock.advance(60)
    assert (await recent.current()).figures == {("near", "FR"): Figures(1, 1, 0.0, 0)}
