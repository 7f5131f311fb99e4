"""Create, check and retrieve run a small, bounded number of SQL statements.

Counted at the driver (every statement SQLAlchemy sends, BEGIN included), so
a change that adds a round trip to a hot path fails here, not in a benchmark.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from sqlalchemy import event

from relay.accounts.models import Caller
from relay.services import Services, build_services
from relay.verifications.service import CreateRequest
from tests.harness import test_settings
from tests.webhooks.receiver import isolated_database

# Upper bounds, with the statements they stand for (SQLite; PostgreSQL adds no round trips).
# create, two transactions: (1) BEGIN, the number's pending verification (and whether
# its TTL ran out), verifications opened this hour, every abuse counter in one query,
# blocks, insert verification, insert attempt, counters in one upsert; (2) the
# carrier's answer (the sandbox's comes
# with its receipt): BEGIN, record sent, record delivered, one load, two events. The
# answer is that load: no third round trip.
CREATE_LIMIT = 15
# BEGIN, the code's MAC with its destination, failed-check counters, the counting
# UPDATE, one counter upsert, the verification and its attempts, the event.
CHECK_LIMIT = 8
RETRIEVE_LIMIT = 3  # BEGIN, the verification, its attempts


@contextmanager
def counted(services: Services) -> Iterator[list[str]]:
    statements: list[str] = []

    def count(*args: Any) -> None:
        statements.append(str(args[2]).split()[0].upper())

    engines = services.db.engines  # type: ignore[attr-defined]
    for engine in engines:
        event.listen(engine, "before_cursor_execute", count)
    try:
        yield statements
    finally:
        for engine in engines:
            event.remove(engine, "before_cursor_execute", count)


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
