"""Create, check and retrieve run a small, bounded number of SQL statements.

Counted as they reach the driver (every statement a unit of work runs; the
writer's BEGIN, SAVEPOINT and COMMIT are not among them), so a change that adds
a round trip to a hot path fails here, not in a benchmark.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import pytest_asyncio

from relay.accounts.models import Caller
from relay.services import Services, build_services
from relay.verifications.service import CreateRequest
from tests.harness import test_settings
from tests.webhooks.receiver import isolated_database

# Upper bounds, with the statements they stand for (SQLite; PostgreSQL adds no round trips).
# create, one transaction: the number's pending verification (and whether its
# TTL ran out), verifications opened this hour, every abuse counter in one query,
# insert verification, insert attempt; the sandbox's answer, which needs no I/O and
# so is recorded in the same transaction (with its receipt): the attempt moved from
# queued to delivered in one UPDATE, one load (the verification joined to its
# attempts), two events; last, the counters in one upsert. The answer is that
# load: no further round trip.
CREATE_LIMIT = 11
# The code's MAC with its destination, failed-check counters, the counting
# UPDATE, one counter upsert, the verification joined to its attempts, the event.
CHECK_LIMIT = 6
RETRIEVE_LIMIT = 1  # the verification joined to its attempts


@contextmanager
def counted(services: Services) -> Iterator[list[str]]:
    """Every statement run while inside, by its first word."""
    statements: list[str] = []
    services.db.trace(lambda statement: statements.append(statement.text.split()[0].upper()))
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


@pytest_asyncio.fixture
async def services(tmp_path: Path, database_url: str) -> AsyncIterator[Services]:
    url = await asyncio.to_thread(isolated_database, database_url, "query_counts", tmp_path)
    built = build_services(test_settings(tmp_path, url))
    await built.delivery.start(dispatch=True)
    try:
        yield built
    finally:
        await built.close()


async def caller(services: Services) -> Caller:
    account = await services.accounts.create_account("Acme")
    return await services.accounts.authenticate(account.test_key)


def request(to: str) -> CreateRequest:
    return CreateRequest(to=to, locale="en", code_length=6, ttl=600, metadata={}, webhook_url=None)


@pytest.mark.asyncio
async def test_a_create_runs_a_bounded_number_of_statements(services: Services) -> None:
    who = await caller(services)
    await services.verifications.create(who, request("+14155550100"))  # warm caches
    with counted(services) as statements:
        created = await services.verifications.create(who, request("+14155550101"))
    assert created.attempts[0].status.value == "delivered"
    assert len(statements) <= CREATE_LIMIT, statements


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
async def test_a_check_runs_a_bounded_number_of_statements(services: Services) -> None:
    who = await caller(services)
    created = await services.verifications.create(who, request("+14155550102"))
    with counted(services) as statements:
        checked = await services.verifications.check(who, code="000000", verification_id=created.id)
    assert checked.status.value == "approved"
    assert len(statements) <= CHECK_LIMIT, statements


@pytest.mark.asyncio
async def test_a_retrieve_runs_a_bounded_number_of_statements(services: Services) -> None:
    who = await caller(services)
    created = await services.verifications.create(who, request("+14155550103"))
    with counted(services) as statements:
        await services.verifications.retrieve(who, created.id)
    assert len(statements) <= RETRIEVE_LIMIT, statements
