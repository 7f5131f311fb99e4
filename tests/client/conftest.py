"""A real `relay serve` for the client's tests: its own process, database and
webhook receiver, so its deliveries never mix with the rest of the suite's."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from relay.accounts.models import NewAccount
from relay.config import Settings
from relay_client import AsyncRelay, Relay
from tests.concurrency.relay_processes import Served, relay_servers
from tests.harness import create_account, test_settings
from tests.webhooks.receiver import (
    Identity,
    Receiver,
    isolated_database,
    running_receiver,
    write_identity,
)

_numbers = itertools.count(1)


@dataclass(frozen=True)
class LiveRelay:
    """The server as the client sees it, plus the settings a test needs to look inside."""

    base_url: str
    cert: Path
    settings: Settings
    receiver: Receiver

    def client(self, api_key: str, *, base_url: str | None = None, max_retries: int = 2) -> Relay:
        return Relay(
            api_key,
            base_url=base_url or self.base_url,
            verify=os.fspath(self.cert),
            max_retries=max_retries,
        )

    def async_client(self, api_key: str) -> AsyncRelay:
        return AsyncRelay(api_key, base_url=self.base_url, verify=os.fspath(self.cert))


@pytest.fixture(scope="session")
def webhook_identity(tmp_path_factory: pytest.TempPathFactory) -> Identity:
    return write_identity(tmp_path_factory.mktemp("client-webhook-pki"))


@pytest.fixture(scope="session")
def live(
    tmp_path_factory: pytest.TempPathFactory, database_url: str, webhook_identity: Identity
) -> Iterator[LiveRelay]:
    url = isolated_database(database_url, "client", tmp_path_factory.mktemp("client-db"))
    root = tmp_path_factory.mktemp("client-serve")
    environment = {
        "RELAY_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8",
        "RELAY_WEBHOOK_CA_BUNDLE": os.fspath(webhook_identity.ca_path),
        "RELAY_WEBHOOK_RETRY_SCHEDULE": "0.05,0.5,1",
        "RELAY_WEBHOOK_POLL_INTERVAL": "0.1",
    }
    with (
        running_receiver(webhook_identity) as receiver,
        relay_servers(1, root, url, **environment) as (node,),
    ):
        yield _live(node, test_settings(root / "accounts", url), receiver)


def _live(node: Served, settings: Settings, receiver: Receiver) -> LiveRelay:
    return LiveRelay(node.base_url, node.cert, settings, receiver)


@pytest.fixture
def keys(live: LiveRelay) -> NewAccount:
    """A fresh account per test: its lists hold only what the test made."""
    return create_account(live.settings, name="Client")


@pytest.fixture
def relay(live: LiveRelay, keys: NewAccount) -> Iterator[Relay]:
    with live.client(keys.test_key) as client:
        yield client


def fresh_number() -> str:
    """A number no other client test used: one pending verification per number."""
    return f"+1415556{next(_numbers):04d}"
