"""A create that opens a verification under a test key, without an Idempotency-Key, which no
rule refuses as read, writes on PostgreSQL with one statement after its read; anything else
runs the whole create in a transaction, as SQLite always does. Both write the same rows, on either
database."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest

from relay.abuse import store as abuse_store
from relay.abuse.models import Kind
from relay.accounts.models import Caller
from relay.carriers.sandbox import FIRST_CARRIER_FAILS, UNDELIVERABLE
from relay.clock import OffsetClock
from relay.db.driver import Unit
from relay.db.sql import Sql, Tx
from relay.errors import DailyCapReached, ResendTooSoon
from relay.idempotency import claims
from relay.idempotency.claims import Pending
from relay.services import Services, build_services
from relay.verifications.models import Verification
from relay.verifications.service import CreateRequest
from tests.harness import test_settings
from tests.webhooks.receiver import isolated_database

EVENTS = Sql("SELECT type, payload, delivery_status FROM events WHERE related_id = :id ORDER BY id")
COUNTERS = Sql(
    "SELECT kind, subject, SUM(sends) AS sends, SUM(approvals) AS approvals,"
    " SUM(failed_checks) AS failed_checks FROM abuse_counters WHERE account_id = :account"
    " GROUP BY kind, subject ORDER BY kind, subject"
)
OF_NUMBER = Sql(
    "SELECT id, status, sends FROM verifications WHERE account_id = :account AND to_number = :to"
)
# What differs from one verification to the next whatever wrote it.
_OWN = frozenset({"id", "created_at", "updated_at", "expires_at", "at", "created"})


@asynccontextmanager
async def relay(tmp_path: Path, database_url: str, **settings: Any) -> AsyncIterator[Services]:
    url = await asyncio.to_thread(isolated_database, database_url, "create_at_once", tmp_path)
    built = build_services(test_settings(tmp_path, url, **settings), clock=OffsetClock())
    await built.delivery.start(dispatch=True)
    try:
        yield built
    finally:
        await built.close()


async def caller(services: Services, name: str = "Acme") -> Caller:
    account = await services.accounts.create_account(name)
    return await services.accounts.authenticate(account.test_key)


def request(to: str) -> CreateRequest:
    return CreateRequest(to=to, locale="en", code_length=6, ttl=600, metadata={}, webhook_url=None)


@contextmanager
def written_by(services: Services) -> Iterator[list[str]]:
    """How the writes were made: "one statement" (and its read), or "a transaction"."""
    statements: list[str] = []
    commits = services.db.commits
    services.db.trace(lambda statement, _: statements.append(statement.text.split()[0]))
    how: list[str] = []
    try:
        yield how
    finally:
        services.db.trace(None)
        folded = statements == ["SELECT", "WITH"] and services.db.commits == commits
        how.append("one statement" if folded else "a transaction")


@contextmanager
def under_a_key(caller: Caller) -> Iterator[None]:
    later = OffsetClock().now() + timedelta(minutes=1)
    token = claims.running(Pending(caller.scope, "key-1", "hash-1", later))
    try:
        yield
    finally:
        claims.done(token)


def _shown(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _shown(v) for k, v in value.items() if k not in _OWN}
    if isinstance(value, list):
        return [_shown(v) for v in value]
    return value


async def rows_of(services: Services, who: Caller, created: Verification) -> dict[str, Any]:
    """What a create wrote, without what makes one verification's rows its own."""

    async def read(tx: Tx) -> dict[str, Any]:
        events = await tx.fetch(EVENTS, {"id": created.id})
        counters = await tx.fetch(COUNTERS, {"account": who.scope.account_id})
        return {
            "events": [
                (e["type"], e["delivery_status"], _shown(orjson.loads(e["payload"])))
                for e in events
            ],
            "counters": [
                (c["kind"], c["subject"], c["sends"], c["approvals"], c["failed_checks"])
                for c in counters
            ],
        }

    stored = await services.db.read(read)
    stored["verification"] = _shown(created.to_api(services.clock.now()))
    return stored


@pytest.mark.parametrize("to", ["+14155550100", FIRST_CARRIER_FAILS, UNDELIVERABLE])
async def test_a_folded_create_writes_the_rows_a_transaction_writes(
    tmp_path: Path, database_url: str, to: str
) -> None:
    async with relay(tmp_path, database_url) as services:
        # Two accounts of one brand: the SMS and its sender are the same.
        alone, keyed = await caller(services), await caller(services)
        with written_by(services) as how:
            folded = await services.verifications.create(alone, request(to))
        with under_a_key(keyed), written_by(services) as keyed_how:
            in_a_transaction = await services.verifications.create(keyed, request(to))
        expected = "one statement" if services.db.dialect == "postgresql" else "a transaction"
        assert how == [expected]
        assert keyed_how == ["a transaction"]
        assert await rows_of(services, alone, folded) == await rows_of(
            services, keyed, in_a_transaction
        )


async def test_a_folded_create_counts_one_send_for_the_prefix_country_and_account(
    tmp_path: Path, database_url: str
) -> None:
    async with relay(tmp_path, database_url) as services:
        who = await caller(services)
        created = await services.verifications.create(who, request("+14155550100"))
        stored = await rows_of(services, who, created)
    assert stored["counters"] == [
        ("account", "", 1, 0, 0),
        ("country", "US", 1, 0, 0),
        ("prefix", "+1415555", 1, 0, 0),
    ]
    assert [event[0] for event in stored["events"]] == [
        "verification.sent",
        "verification.delivered",
    ]


async def test_a_resend_runs_in_a_transaction(tmp_path: Path, database_url: str) -> None:
    async with relay(tmp_path, database_url) as services:
        who = await caller(services)
        first = await services.verifications.create(who, request("+14155550100"))
        services.clock.advance(31)  # type: ignore[attr-defined]
        with written_by(services) as how:
            again = await services.verifications.create(who, request("+14155550100"))
    assert again.id == first.id
    assert again.sends == 2
    assert how == ["a transaction"]


async def test_a_create_the_guard_refuses_as_read_runs_in_a_transaction_and_is_refused(
    tmp_path: Path, database_url: str
) -> None:
    async with relay(tmp_path, database_url, daily_sms_cap=1) as services:
        who = await caller(services)
        await services.verifications.create(who, request("+14155550100"))
        with written_by(services) as how, pytest.raises(DailyCapReached):
            await services.verifications.create(who, request("+14155550101"))
        left = await services.db.read(
            lambda tx: tx.fetch(OF_NUMBER, {"account": who.scope.account_id, "to": "+14155550101"})
        )
    assert how == ["a transaction"]
    assert left == []


@contextmanager
def after_each_read(services: Services, then: Callable[[], Awaitable[None]]) -> Iterator[None]:
    """Run `then` once, just after the first read made from now on."""
    db = services.db
    original = db.read
    done: list[bool] = []

    async def read(unit: Unit[Any]) -> Any:
        value = await original(unit)
        if not done:
            done.append(True)
            await then()
        return value

    db.read = read  # type: ignore[method-assign]
    try:
        yield
    finally:
        db.read = original  # type: ignore[method-assign]


async def test_a_send_that_reaches_the_daily_cap_after_the_read_is_refused_all_the_same(
    tmp_path: Path, database_url: str
) -> None:
    async with relay(tmp_path, database_url, daily_sms_cap=2) as services:
        if services.db.dialect != "postgresql":
            pytest.skip("SQLite reads in the create's own unit of work")
        who = await caller(services)
        await services.verifications.create(who, request("+14155550100"))
        now = services.clock.now()

        async def another_send() -> None:
            rows = [(Kind.ACCOUNT, "", 1, 0, 0)]
            await services.db.write(lambda tx: abuse_store.bump_many(tx, who.scope, rows, at=now))

        with after_each_read(services, another_send), pytest.raises(DailyCapReached):
            await services.verifications.create(who, request("+14155550101"))
        left = await services.db.read(
            lambda tx: tx.fetch(OF_NUMBER, {"account": who.scope.account_id, "to": "+14155550101"})
        )
        stored = await services.db.read(
            lambda tx: tx.fetch(COUNTERS, {"account": who.scope.account_id})
        )
    assert left == []
    assert [(c["kind"], c["sends"]) for c in stored] == [
        ("account", 2),
        ("country", 1),
        ("prefix", 1),
    ]


async def test_two_creates_for_one_new_number_open_one_verification(
    tmp_path: Path, database_url: str
) -> None:
    async with relay(tmp_path, database_url) as services:
        who = await caller(services)
        both = await asyncio.gather(
            services.verifications.create(who, request("+14155550100")),
            services.verifications.create(who, request("+14155550100")),
            return_exceptions=True,
        )
        opened = await services.db.read(
            lambda tx: tx.fetch(OF_NUMBER, {"account": who.scope.account_id, "to": "+14155550100"})
        )
        stored = await services.db.read(
            lambda tx: tx.fetch(COUNTERS, {"account": who.scope.account_id})
        )
    assert sorted(type(outcome).__name__ for outcome in both) == [
        ResendTooSoon.__name__,
        Verification.__name__,
    ]
    assert [(row["status"], row["sends"]) for row in opened] == [("pending", 1)]
    assert [(c["kind"], c["sends"]) for c in stored] == [
        ("account", 1),
        ("country", 1),
        ("prefix", 1),
    ]


async def _bump(tx: Tx, who: Caller, kind: Kind, subject: str, sends: int, failed: int) -> None:
    now = OffsetClock().now()
    await abuse_store.bump_many(tx, who.scope, [(kind, subject, sends, 0, failed)], at=now)


async def _block(tx: Tx, who: Caller, kind: Kind, subject: str, _: int, __: int) -> None:
    now = OffsetClock().now()
    until = now + timedelta(minutes=5)
    await abuse_store.block(tx, who.scope, kind, subject, until=until, now=now)


@pytest.mark.parametrize(
    ("change", "opens"),
    [
        ((_bump, Kind.ACCOUNT, "", 1, 0), True),
        ((_bump, Kind.ACCOUNT, "", 2, 0), False),
        ((_bump, Kind.NUMBER, "+14155550100", 0, 2), True),
        ((_bump, Kind.NUMBER, "+14155550100", 0, 3), False),
        ((_block, Kind.PREFIX, "+1415555", 0, 0), False),
        ((_block, Kind.COUNTRY, "US", 0, 0), False),
        ((_block, Kind.COUNTRY, "GB", 0, 0), True),
    ],
)
async def test_the_send_gate_closes_on_the_daily_cap_the_wrong_codes_and_blocks(
    tmp_path: Path, database_url: str, change: tuple[Any, ...], opens: bool
) -> None:
    # A test key's cap of wrong codes per number: the rule's, times the test mode's factor (3).
    settings = {
        "daily_sms_cap": 2,
        "number_failed_checks_per_day": 1,
        "test_mode_number_limit_factor": 3,
    }
    async with relay(tmp_path, database_url, **settings) as services:
        who = await caller(services)
        write, *args = change
        await services.db.write(lambda tx: write(tx, who, *args))
        destination, _ = services.delivery.destination(who, "+14155550100")
        gate = services.abuse.send_gate(who.scope, destination, now=services.clock.now())
        found = await services.db.read(lambda tx: tx.fetchrow(gate.sql, gate.params))
    assert (found is not None) == opens
