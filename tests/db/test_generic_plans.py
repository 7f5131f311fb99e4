"""On PostgreSQL, every statement of the request path finds its rows by index even
under a generic plan and without statistics (PostgreSQL).

asyncpg prepares each statement once per connection; after five runs PostgreSQL
may switch it to a generic plan, chosen without the parameters' values. On a table
that has no statistics yet (a new database, before autovacuum's first ANALYZE),
the check's UPDATE once chose the partial unique index on (account, mode, number)
and walked every pending verification of the account to find its one row: 3.7 ms
of database CPU per check instead of 0.1. Each statement the paths below run is
replayed here under `plan_cache_mode = force_generic_plan`, on tables whose
autovacuum is off, among a few hundred rows of the same account, and must not
discard rows it read on the way to its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import pytest_asyncio

from relay.accounts.models import Caller
from relay.db.sql import Params, Sql, values
from relay.db.urls import is_postgres, postgres_dsn
from relay.errors import RelayError
from relay.messages.service import SendRequest
from relay.services import Services, build_services
from relay.verifications.service import CreateRequest
from tests.harness import test_settings
from tests.webhooks.receiver import isolated_database

# Rows of the same account the statements must not walk through.
NEIGHBOURS = 300
# A statement may discard a few rows (another attempt of the same verification, an
# expired bucket of the same counter), never the account's other verifications.
DISCARDED_AT_MOST = 10

Traced = list[tuple[Sql, Params | None]]


@pytest.fixture
def pg_url(database_url: str) -> str:
    if not is_postgres(database_url):
        pytest.skip("generic plans are PostgreSQL's")
    return database_url


@pytest_asyncio.fixture
async def services(tmp_path: Path, pg_url: str) -> AsyncIterator[Services]:
    url = await asyncio.to_thread(isolated_database, pg_url, "generic_plans", tmp_path)
    connection = await asyncpg.connect(postgres_dsn(url))
    try:
        tables = await connection.fetch(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
        )
        for table in tables:
            await connection.execute(
                f'ALTER TABLE "{table["tablename"]}" SET (autovacuum_enabled = false)'
            )
    finally:
        await connection.close()
    # The neighbours share a prefix, which the pumping guard would block.
    built = build_services(test_settings(tmp_path, url, pumping_guard="off"))
    await built.delivery.start(dispatch=True)
    try:
        yield built
    finally:
        await built.close()


@contextmanager
def traced(services: Services) -> Iterator[Traced]:
    seen: Traced = []
    services.db.trace(lambda statement, params: seen.append((statement, params)))
    try:
        yield seen
    finally:
        services.db.trace(None)


def literal(value: Any) -> str:
    """A driver value as an untyped SQL literal, which PostgreSQL casts to the
    parameter's type as it would the bound value."""
    if value is None:
        return "NULL"
    if isinstance(value, bytes):
        text = "\\x" + value.hex()
    elif isinstance(value, datetime):
        text = value.isoformat()
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, list | dict):
        text = json.dumps(value)
    else:
        text = str(value)
    return "'" + text.replace("'", "''") + "'"


def discarded(plan: dict[str, Any]) -> int:
    """Rows the plan's nodes read and threw away, over the whole tree."""
    own = int(plan.get("Rows Removed by Filter", 0)) + int(
        plan.get("Rows Removed by Index Recheck", 0)
    )
    return own + sum(discarded(child) for child in plan.get("Plans", []))


def plain_insert(statement: Sql) -> bool:
    """An INSERT … VALUES chooses no plan (and would only collide with its own row here)."""
    text = statement.text.upper()
    return text.startswith("INSERT") and "SELECT" not in text and "ON CONFLICT" not in text


def fresh(params: Params | None) -> Params | None:
    """A folded create's parameters with ids of its own (its rows were written once)."""
    if params is None or "id__0" not in params:
        return params
    return {k: f"{v}x" if k.startswith("id__") else v for k, v in params.items()}


async def analyzed(connection: Any, name: str, statement: Sql, params: Params | None) -> Any:
    """The plan `statement` ran with, prepared as the driver prepares it and executed
    once under EXPLAIN ANALYZE, in a transaction rolled back after."""
    args = values(statement, params, "postgresql") if params is not None else ()
    await connection.execute(f"PREPARE {name} AS {statement.postgres}")
    arguments = f"({', '.join(literal(arg) for arg in args)})" if args else ""
    transaction = connection.transaction()
    await transaction.start()
    try:
        explained = await connection.fetchval(
            f"EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE {name}{arguments}"
        )
    finally:
        await transaction.rollback()
    return json.loads(explained)[0]["Plan"]


async def generic_plans(dsn: str, statements: Traced) -> list[tuple[str, int, str]]:
    """Each statement run once under its generic plan (rolled back): what it discarded."""
    connection = await asyncpg.connect(dsn)
    found: list[tuple[str, int, str]] = []
    try:
        await connection.execute("SET plan_cache_mode = force_generic_plan")
        for number, (statement, params) in enumerate(statements):
            if plain_insert(statement):
                continue
            plan = await analyzed(connection, f"traced_{number}", statement, fresh(params))
            found.append((statement.text[:90], discarded(plan), json.dumps(plan)[:1000]))
    finally:
        await connection.close()
    return found


def request(to: str) -> CreateRequest:
    return CreateRequest(to=to, locale="en", code_length=6, ttl=600, metadata={}, webhook_url=None)


async def every_request_kind(services: Services, who: Caller) -> None:
    """Create, resend, wrong and right checks by id and by number,
    retrieve, cancel, and the expiry sweep; a message by the Send API and its retrieval."""
    first = await services.verifications.create(who, request("+14155550100"))
    # Too soon for a resend: the refusal's statements are traced all the same.
    with contextlib.suppress(RelayError):
        await services.verifications.create(who, request("+14155550100"))
    await services.verifications.check(who, code="123456", verification_id=first.id)
    await services.verifications.check(who, code="123456", to="+14155550100")
    await services.verifications.check(who, code="000000", to="+14155550100")
    second = await services.verifications.create(who, request("+14155550101"))
    await services.verifications.retrieve(who, second.id)
    await services.verifications.cancel(who, second.id)
    await services.verifications.expire_due()  # nothing is due: it must find that by index
    message = await services.messages.send(
        who,
        SendRequest(to="+14155550102", code="123456", locale="en", metadata={}, webhook_url=None),
    )
    await services.messages.retrieve(who, message.id)


@pytest.mark.asyncio
async def test_the_request_path_finds_its_rows_by_index_under_generic_plans(
    services: Services,
) -> None:
    account = await services.accounts.create_account("Acme")
    who = await services.accounts.authenticate(account.test_key)
    await asyncio.gather(
        *(
            services.verifications.create(who, request(f"+1415666{n:04d}"))
            for n in range(NEIGHBOURS)
        )
    )
    unseen = await services.accounts.create_account("Unseen")
    with traced(services) as statements:
        # A key this process does not keep yet: its lookup is traced.
        await services.accounts.authenticate(unseen.test_key)
        await every_request_kind(services, who)
    assert len(statements) > 10, statements
    assert any("FROM api_keys k JOIN" in statement.text for statement, _ in statements)
    plans = await generic_plans(postgres_dsn(services.settings.resolved_database_url), statements)
    walked = [(text, rows, plan) for text, rows, plan in plans if rows > DISCARDED_AT_MOST]
    assert not walked, walked
