"""Create, check and retrieve run a small, bounded number of SQL statements.

Counted as they reach the driver (every statement a unit of work runs; the
writer's BEGIN, SAVEPOINT and COMMIT are not among them), so a change that adds
a round trip to a hot path fails here, not in a benchmark.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from relay.accounts.models import Caller
from relay.services import Services
from relay.verifications.service import CreateRequest

# Upper bounds, with the statements they stand for, the same on SQLite and PostgreSQL.
# create, one transaction: everything the send is decided on in one read (the
# number's pending and recent verifications, every abuse counter, the blocks);
# insert the verification; insert its attempt, already in its final state (the
# sandbox answers without I/O, so nothing is queued and then updated); both
# events in one statement; the counters in one upsert. Nothing is read back.
CREATE_LIMIT = 5
# The verification with its attempts, its code's MAC and its number's wrong codes;
# the counting UPDATE; the approval's event; the approval counters.
APPROVING_CHECK_LIMIT = 4
# A wrong code records no event: the read, the UPDATE, the number's wrong-code counter.
WRONG_CHECK_LIMIT = 3
# PostgreSQL counts it and its counter in one statement, committed alone (no writer).
WRONG_CHECK_LIMIT_POSTGRES = 2
RETRIEVE_LIMIT = 1  # the verification joined to its attempts


@contextmanager
def counted(services: Services) -> Iterator[list[str]]:
    """Every statement run while inside, by its first word."""
    statements: list[str] = []
    services.db.trace(lambda statement, _: statements.append(statement.text.split()[0].upper()))
    try:
        yield statements
    finally:
        services.db.trace(None)


@contextmanager
def committed(services: Services) -> Iterator[list[int]]:
    """Holds the number of commits made while inside, once it has closed."""
    before = services.db.commits
    made: list[int] = []
    try:
        yield made
    finally:
        made.append(services.db.commits - before)


async def caller(services: Services) -> Caller:
    account = await services.accounts.create_account("Acme")
    return await services.accounts.authenticate(account.test_key)


def request(to: str) -> CreateRequest:
    return CreateRequest(to=to, locale="en", code_length=6, ttl=600, metadata={}, webhook_url=None)


@pytest.mark.asyncio
async def test_a_create_runs_a_bounded_number_of_statements(services: Services) -> None:
    who = await caller(services)
    await services.verifications.create(who, request("+14155550100"))  # warm caches
    with counted(services) as statements, committed(services) as commits:
        created = await services.verifications.create(who, request("+14155550101"))
    assert created.attempts[0].status.value == "delivered"
    assert len(statements) <= CREATE_LIMIT, statements
    assert commits == [1]


@pytest.mark.asyncio
async def test_an_account_with_its_own_texts_costs_no_statement_more(
    services: Services,
) -> None:
    """Its texts are read in the send's one read (a part of its own, by the table's key);
    whether it has any came with the key look-up. And they are the words it sends."""
    plain = await caller(services)
    account = await services.accounts.create_account("Acme")
    await services.texts.set(account.id, channel="sms", locale="en", text="{brand} code {code}")
    own = await services.accounts.authenticate(account.test_key)
    counts = []
    for who, to in ((plain, "+1415555010"), (own, "+1415555020")):
        await services.verifications.create(who, request(to + "0"))  # warm caches
        with counted(services) as statements:
            await services.verifications.create(who, request(to + "1"))
        counts.append(len(statements))
    assert counts[1] == counts[0]
    [sms] = [sms for sms in services.sandbox.sent if sms.to == "+14155550201"]
    assert sms.body.startswith("Acme code ")


@pytest.mark.asyncio
async def test_a_sandbox_create_and_its_failover_commit_in_one_transaction(
    services: Services,
) -> None:
    who = await caller(services)
    await services.verifications.create(who, request("+14155550100"))  # warm caches
    with committed(services) as commits:
        # The first sandbox route is down for this number; the backup delivers.
        created = await services.verifications.create(who, request("+15005550001"))
    assert [attempt.status.value for attempt in created.attempts] == ["failed", "delivered"]
    assert commits == [1]


@pytest.mark.asyncio
async def test_an_approving_check_runs_a_bounded_number_of_statements(services: Services) -> None:
    who = await caller(services)
    created = await services.verifications.create(who, request("+14155550102"))
    with counted(services) as statements:
        checked = await services.verifications.check(who, code="000000", verification_id=created.id)
    assert checked.status.value == "approved"
    assert len(statements) <= APPROVING_CHECK_LIMIT, statements


@pytest.mark.asyncio
async def test_a_wrong_code_runs_a_bounded_number_of_statements(services: Services) -> None:
    who = await caller(services)
    created = await services.verifications.create(who, request("+14155550104"))
    with counted(services) as statements, committed(services) as commits:
        checked = await services.verifications.check(who, code="123456", verification_id=created.id)
    assert checked.checks == 1
    assert checked.status.value == "pending"
    if services.db.dialect == "postgresql":
        assert len(statements) <= WRONG_CHECK_LIMIT_POSTGRES, statements
        assert commits == [0]
    else:
        assert len(statements) <= WRONG_CHECK_LIMIT, statements


@pytest.mark.asyncio
async def test_a_retrieve_runs_a_bounded_number_of_statements(services: Services) -> None:
    who = await caller(services)
    created = await services.verifications.create(who, request("+14155550103"))
    with counted(services) as statements:
        await services.verifications.retrieve(who, created.id)
    assert len(statements) <= RETRIEVE_LIMIT, statements
