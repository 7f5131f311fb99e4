"""Fixtures shared by the suite. With RELAY_TEST_DATABASE_URL set, everything runs on
that PostgreSQL database instead of a temporary SQLite file."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import asyncpg
import httpx
import pytest

from relay.accounts.models import NewAccount
from relay.db.migrate import upgrade
from relay.db.urls import is_postgres
from tests.carriers.smpp_peer import install_peer
from tests.harness import RunningServer, ServerThread, create_account, run, test_settings
from tests.webhooks.receiver import Identity, Receiver, running_receiver, write_identity

PG_URL = os.environ.get("RELAY_TEST_DATABASE_URL")


async def _reset_postgres(url: str) -> None:
    dsn = url.replace("postgresql+asyncpg://", "postgresql://")
    conn = await asyncpg.connect(dsn)
    try:
        # The test database belongs to the suite: start from an empty schema.
        await conn.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
    finally:
        await conn.close()


@pytest.fixture(scope="session")
def database_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    if PG_URL:
        assert is_postgres(PG_URL), "RELAY_TEST_DATABASE_URL must be a postgresql:// URL"
        run(_reset_postgres(PG_URL))
        url = PG_URL
    else:
        url = f"sqlite:///{tmp_path_factory.mktemp('db') / 'relay.sqlite3'}"
    upgrade(url)
    return url


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory, database_url: str) -> Iterator[RunningServer]:
    settings = test_settings(tmp_path_factory.mktemp("data"), database_url)
    with ServerThread(settings) as running:
        yield running


@pytest.fixture(autouse=True)
def _reset_clock(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if "server" in request.fixturenames:
        request.getfixturevalue("server").clock.offset = timedelta(0)


@pytest.fixture
def account(server: RunningServer) -> NewAccount:
    """A fresh account per test: tests never see each other's data."""
    return create_account(server.settings)


@pytest.fixture
def api(server: RunningServer, account: NewAccount) -> Iterator[httpx.Client]:
    with server.client(account.test_key) as client:
        yield client


@pytest.fixture
def live_api(server: RunningServer, account: NewAccount) -> Iterator[httpx.Client]:
    with server.client(account.live_key) as client:
        yield client


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path


@pytest.fixture(scope="session")
def peer_dir(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """node-smpp installed once per lockfile (npm ci into a cache, never the source tree)."""
    cache = getattr(pytestconfig, "cache", None)
    root = cache.mkdir("smpp-peer") if cache is not None else tmp_path_factory.mktemp("npm")
    return install_peer(Path(root))


@pytest.fixture(scope="module")
def identity(tmp_path_factory: pytest.TempPathFactory) -> Identity:
    """A test CA and the receiver's leaf, for a module whose server posts webhooks."""
    return write_identity(tmp_path_factory.mktemp("webhook-pki"))


@pytest.fixture(scope="module")
def receiver(identity: Identity) -> Iterator[Receiver]:
    """An HTTPS webhook receiver in its own process, trusted by `identity`'s CA."""
    with running_receiver(identity) as running:
        yield running
