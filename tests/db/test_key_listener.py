"""PostgreSQL: how a process hears of key changes. A change returns once every listening
process dropped what it kept; a process whose listener is down reads every key, and
keeps them again once it is back."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import asyncpg
import pytest
import pytest_asyncio

from relay.clock import OffsetClock
from relay.db import listener
from relay.db.changes import KEYS
from relay.db.urls import is_postgres
from relay.services import build_services
from tests.db.test_key_statements import Two, refused, statements
from tests.harness import test_settings
from tests.webhooks.receiver import isolated_database

T = TypeVar("T")

PG_URL = os.environ.get("RELAY_TEST_DATABASE_URL", "")
pytestmark = pytest.mark.skipif(
    not (PG_URL and is_postgres(PG_URL)),
    reason="LISTEN/NOTIFY: needs RELAY_TEST_DATABASE_URL=postgresql://…",
)


@pytest_asyncio.fixture
async def two(tmp_path: Path, database_url: str) -> AsyncIterator[Two]:
    url = await asyncio.to_thread(isolated_database, database_url, "key_listener", tmp_path)
    server = build_services(test_settings(tmp_path / "server", url))
    other = build_services(test_settings(tmp_path / "other", url))
    try:
        account = await other.accounts.create_account("Acme")
        assert await server.accounts.start()
        yield Two(server, other, OffsetClock(), account)
    finally:
        await other.close()
        await server.close()


def dsn(two: Two) -> str:
    return two.server.settings.resolved_database_url


async def listeners(two: Two) -> list[int]:
    """Backends of this database's connections that listen for key changes."""
    connection = await asyncpg.connect(dsn(two))
    try:
        rows = await connection.fetch(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND application_name LIKE 'relay-keys %'"
        )
    finally:
        await connection.close()
    return [row["pid"] for row in rows]


async def until(condition: object, seconds: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not callable(condition) or not condition():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.01)


class LoopThread:
    """An event loop on a thread of its own: another process, as far as timing goes."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=30)

    def block(self, seconds: float) -> None:
        """Keep the loop busy for `seconds`, starting now."""
        started = threading.Event()

        def busy() -> None:
            started.set()
            time.sleep(seconds)

        self.loop.call_soon_threadsafe(busy)
        started.wait()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()


@pytest.mark.asyncio
async def test_a_revocation_returns_only_once_a_busy_process_has_dropped_its_keys(
    tmp_path: Path, database_url: str
) -> None:
    url = await asyncio.to_thread(isolated_database, database_url, "key_listener", tmp_path)
    other = build_services(test_settings(tmp_path / "other", url))
    elsewhere = LoopThread()
    server = build_services(test_settings(tmp_path / "server", url))
    try:
        account = await other.accounts.create_account("Acme")
        assert elsewhere.run(server.accounts.start())
        key_id = elsewhere.run(server.accounts.authenticate(account.test_key)).key_id
        # Its loop is busy when the notification comes, and a request is queued behind it.
        elsewhere.block(0.5)
        await other.accounts.revoke_key(key_id)
        assert elsewhere.run(refused(server, account.test_key))
    finally:
        await other.close()
        elsewhere.run(server.close())
        elsewhere.stop()


@pytest.mark.asyncio
async def test_with_its_listener_cut_a_process_reads_every_key_and_keeps_them_once_back(
    two: Two, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="relay.db")
    changes = two.server.db.changes(KEYS)
    key = two.account.test_key
    await two.server.accounts.authenticate(key)
    # Long enough to do what follows while it is down; back in two seconds.
    monkeypatch.setattr(listener, "RECONNECT_DELAYS", (2.0, 2.0))
    [pid] = await listeners(two)
    admin = await asyncpg.connect(dsn(two))
    try:
        assert await admin.fetchval("SELECT pg_terminate_backend($1)", pid)
    finally:
        await admin.close()
    await until(lambda: not changes.fresh())
    for _ in range(2):
        with statements(two.server) as seen:
            await two.server.accounts.authenticate(key)
        assert seen == ["lookup"]
    key_id = (await two.server.accounts.authenticate(key)).key_id
    await two.other.accounts.revoke_key(key_id)
    assert await refused(two.server, key)
    assert not changes.fresh(), "the listener came back too soon for this test to say anything"

    await until(changes.fresh)
    fresh = await two.other.accounts.create_key(two.account.id, "test")
    await two.server.accounts.authenticate(fresh.secret)
    with statements(two.server) as seen:
        await two.server.accounts.authenticate(fresh.secret)
    assert seen == []
    said = [r.getMessage().split()[0] for r in caplog.records if r.name == "relay.db"]
    assert said == ["changes.listener_lost", "changes.listener_up"]


@pytest.mark.asyncio
async def test_a_process_that_never_confirms_is_waited_for_a_bounded_time_and_named(
    two: Two, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(listener, "SETTLE_TIMEOUT", 0.3)
    # A process whose loop is stuck: its connection says it listens, and never says more.
    stuck = await asyncpg.connect(dsn(two), server_settings={"application_name": "relay-keys 0"})
    try:
        stuck_pid = stuck.get_server_pid()
        key_id = (await two.server.accounts.authenticate(two.account.test_key)).key_id
        loop = asyncio.get_running_loop()
        began = loop.time()
        with caplog.at_level(logging.WARNING, logger="relay.db"):
            await two.other.accounts.revoke_key(key_id)
        assert loop.time() - began >= 0.3
    finally:
        await stuck.close()
    [warning] = [r.getMessage() for r in caplog.records if "changes.unconfirmed" in r.getMessage()]
    assert f"processes={stuck_pid}" in warning
    # The process that does listen dropped its keys all the same.
    assert await refused(two.server, two.account.test_key)


@pytest.mark.asyncio
async def test_a_listening_process_names_the_generation_it_heard(two: Two) -> None:
    key_id = (await two.server.accounts.authenticate(two.account.test_key)).key_id
    await two.other.accounts.restrict_key(key_id, None)
    await two.other.accounts.restrict_key(key_id, None)
    connection = await asyncpg.connect(dsn(two))
    try:
        generation = await connection.fetchval(
            "SELECT generation FROM cache_generations WHERE name = 'keys'"
        )
        names = await connection.fetch(
            "SELECT application_name FROM pg_stat_activity WHERE datname = current_database()"
            " AND application_name LIKE 'relay-keys %'"
        )
    finally:
        await connection.close()
    assert generation == 2
    assert [row["application_name"] for row in names] == ["relay-keys 2"]
