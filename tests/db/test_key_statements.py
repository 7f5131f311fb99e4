"""What authenticating costs: a key seen before, no statement; a key never seen, its one
lookup; and a change made by another process is what the next request meets.

"Another process" is a second set of services on the same database: other connections,
which is what another process is to SQLite's data_version and to PostgreSQL's NOTIFY.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio

from relay.accounts.models import NewAccount
from relay.clock import OffsetClock
from relay.errors import AuthenticationFailed
from relay.services import Services, build_services
from tests.harness import test_settings
from tests.webhooks.receiver import isolated_database

LOOKUP = "api_keys k JOIN accounts"
COUNTER = "FROM cache_generations"


@dataclass
class Two:
    """The server under test (its clock adjustable) and another process on its database."""

    server: Services
    other: Services
    clock: OffsetClock
    account: NewAccount

    @property
    def sqlite(self) -> bool:
        return self.server.db.dialect == "sqlite"


@pytest_asyncio.fixture
async def two(tmp_path: Path, database_url: str) -> AsyncIterator[Two]:
    url = await asyncio.to_thread(isolated_database, database_url, "key_statements", tmp_path)
    clock = OffsetClock()
    server = build_services(test_settings(tmp_path / "server", url), clock=clock)
    other = build_services(test_settings(tmp_path / "other", url))
    try:
        account = await other.accounts.create_account("Acme")
        assert await server.accounts.start()
        yield Two(server, other, clock, account)
    finally:
        await other.close()
        await server.close()


@contextmanager
def statements(services: Services) -> Iterator[list[str]]:
    """What each statement run while inside is about: the key's lookup, the counter of
    changes, or the first word of anything else."""
    seen: list[str] = []

    def trace(statement: object, _params: object) -> None:
        text = str(getattr(statement, "text", ""))
        if LOOKUP in text:
            seen.append("lookup")
        elif COUNTER in text:
            seen.append("counter")
        else:
            seen.append(text.split()[0].upper())

    services.db.trace(trace)
    try:
        yield seen
    finally:
        services.db.trace(None)


async def refused(services: Services, key: str) -> bool:
    try:
        await services.accounts.authenticate(key)
    except AuthenticationFailed:
        return True
    return False


async def key_id(services: Services, raw: str) -> str:
    return (await services.accounts.authenticate(raw)).key_id


@pytest.mark.asyncio
async def test_a_key_never_seen_costs_its_lookup_and_a_key_seen_before_nothing(two: Two) -> None:
    with statements(two.server) as first:
        await two.server.accounts.authenticate(two.account.test_key)
    # Its lookup, and its use noted for the minute.
    assert first == ["lookup", "UPDATE"]
    for _ in range(3):
        with statements(two.server) as again:
            await two.server.accounts.authenticate(two.account.test_key)
        assert again == []


@pytest.mark.asyncio
async def test_a_commit_elsewhere_that_changes_no_key_keeps_what_was_kept(two: Two) -> None:
    await two.server.accounts.authenticate(two.account.test_key)
    await two.other.accounts.create_account("Unrelated")
    with statements(two.server) as seen:
        await two.server.accounts.authenticate(two.account.test_key)
    # SQLite hears that another connection committed, and reads the counter to learn
    # that no key changed; PostgreSQL is told nothing.
    assert seen == (["counter"] if two.sqlite else [])
    with statements(two.server) as seen:
        await two.server.accounts.authenticate(two.account.test_key)
    assert seen == []


@pytest.mark.asyncio
async def test_a_key_revoked_elsewhere_is_refused_at_the_next_request(two: Two) -> None:
    kept = await key_id(two.server, two.account.test_key)
    await two.other.accounts.revoke_key(kept)
    with statements(two.server) as seen:
        assert await refused(two.server, two.account.test_key)
    # The lookup finds it revoked, and the refusal is noted.
    assert seen == [*(["counter"] if two.sqlite else []), "lookup", "UPDATE"]
    # Revoked for good: kept as such, refused without a statement.
    with statements(two.server) as seen:
        assert await refused(two.server, two.account.test_key)
    assert seen == []


@pytest.mark.asyncio
async def test_a_key_revoked_by_this_process_is_dropped_at_once(two: Two) -> None:
    kept = await key_id(two.server, two.account.test_key)
    await two.server.accounts.revoke_key(kept)
    assert len(two.server.accounts.cache) == 0
    with statements(two.server) as seen:
        assert await refused(two.server, two.account.test_key)
    # Its own commit does not move SQLite's data_version: no counter read.
    assert seen == ["lookup", "UPDATE"]


@pytest.mark.asyncio
async def test_a_roll_elsewhere_ends_the_old_key_when_its_kept_overlap_ends(two: Two) -> None:
    kept = await key_id(two.server, two.account.test_key)
    await two.other.accounts.roll_key(kept, overlap=60)
    assert not await refused(two.server, two.account.test_key)
    two.clock.advance(61)
    with statements(two.server) as seen:
        assert await refused(two.server, two.account.test_key)
    # Decided on the kept expires_at against the request's now: only the refusal's note.
    assert seen == ["UPDATE"]


@pytest.mark.asyncio
async def test_a_roll_without_overlap_elsewhere_refuses_the_old_key_at_once(two: Two) -> None:
    kept = await key_id(two.server, two.account.test_key)
    rolled = await two.other.accounts.roll_key(kept, overlap=0)
    assert await refused(two.server, two.account.test_key)
    assert not await refused(two.server, rolled.secret)


@pytest.mark.asyncio
async def test_ranges_set_elsewhere_are_met_by_the_next_request(two: Two) -> None:
    from relay.accounts.access import check_networks

    kept = await key_id(two.server, two.account.test_key)
    await two.other.accounts.restrict_key(kept, check_networks(["10.0.0.0/8"]))
    assert await refused(two.server, two.account.test_key)
    await two.other.accounts.restrict_key(kept, None)
    assert not await refused(two.server, two.account.test_key)


@pytest.mark.asyncio
async def test_own_texts_set_and_deleted_elsewhere_are_in_the_next_callers_record(
    two: Two,
) -> None:
    texts = two.other.texts
    account = two.account.id
    assert not (await two.server.accounts.authenticate(two.account.test_key)).has_templates
    await texts.set(account, channel="sms", locale="en", text="{brand}: {code}")
    assert (await two.server.accounts.authenticate(two.account.test_key)).has_templates
    await texts.delete(account, channel="sms", locale="en")
    assert not (await two.server.accounts.authenticate(two.account.test_key)).has_templates


@pytest.mark.asyncio
async def test_allowed_countries_set_elsewhere_are_in_the_next_callers_record(two: Two) -> None:
    await two.server.accounts.authenticate(two.account.test_key)
    await two.other.accounts.set_allowed_countries(two.account.id, frozenset({"FR"}))
    caller = await two.server.accounts.authenticate(two.account.test_key)
    assert caller.allowed_countries == frozenset({"FR"})
