"""A real Relay server for tests: granian with TLS on loopback, in a thread."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import random
import socket
import ssl
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx

from relay.accounts.models import NewAccount
from relay.cli.listening import Embedded
from relay.cli.serve import listener_of
from relay.clock import OffsetClock
from relay.config import Settings
from relay.db.driver import open_db
from relay.db.group_commit import Unit
from relay.db.sql import Sql, Tx
from relay.db.tables import metadata
from relay.services import Services, build_services
from relay.tls import CertificatePaths, ensure_self_signed
from relay.web.app import create_app

T = TypeVar("T")
TEST_CODE_KEY = "test-code-key-0123456789-0123456789-abcdef"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_settings(data_dir: Path, database_url: str, **extra: Any) -> Settings:
    return Settings(data_dir=data_dir, database_url=database_url, code_key=TEST_CODE_KEY, **extra)


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def read_db(settings: Settings, unit: Unit[T]) -> T:
    """Run `unit` on a connection of its own to the server's database, from a test."""

    async def go() -> T:
        db = open_db(settings.resolved_database_url)
        try:
            return await db.read(unit)
        finally:
            await db.close()

    return run(go())


def count_rows(settings: Settings, sql: str, **params: Any) -> int:
    """`sql` is a `SELECT count(*) AS n …` with :name parameters."""
    statement = Sql(sql)

    async def count(tx: Tx) -> int:
        row = await tx.fetchrow(statement, params)
        assert row is not None
        return int(row["n"])

    return read_db(settings, count)


def every_stored_value(settings: Settings) -> list[Any]:
    """Every value of every row of every table, as stored."""

    async def dump(tx: Tx) -> list[Any]:
        found: list[Any] = []
        for table in metadata.sorted_tables:
            for row in await tx.fetch(Sql(f"SELECT * FROM {table.name}")):  # noqa: S608
                found += list(row)
        return found

    return read_db(settings, dump)


def using_services(settings: Settings, use: Callable[[Services], Awaitable[T]]) -> T:
    """Run one use case on services of their own on the server's database, from a test."""

    async def go() -> T:
        services = build_services(settings)
        try:
            return await use(services)
        finally:
            await services.close()

    return run(go())


@contextlib.contextmanager
def traced(services: Services) -> Iterator[list[str]]:
    """The text of every statement the server runs while inside."""
    statements: list[str] = []
    services.db.trace(lambda statement, _: statements.append(statement.text))
    try:
        yield statements
    finally:
        services.db.trace(None)


def create_account(settings: Settings, name: str = "Acme") -> NewAccount:
    return using_services(settings, lambda services: services.accounts.create_account(name))


@dataclass
class RunningServer:
    base_url: str
    cert: CertificatePaths
    services: Services
    clock: OffsetClock
    settings: Settings

    def tls_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=os.fspath(self.cert.cert))

    def client(self, key: str | None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(
            base_url=self.base_url, verify=self.tls_context(), headers=headers, timeout=30
        )

    @property
    def loopback_url(self) -> str:
        return self.base_url.replace("localhost", "127.0.0.1")

    def from_address(self, address: str, key: str | None = None) -> httpx.Client:
        """A client whose connections leave from `address` (127.0.0.2, 127.0.0.3, ...):
        the server sees a client address of its own, as the TCP peer, with no proxy."""
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        transport = httpx.HTTPTransport(local_address=address, verify=self.tls_context())
        return httpx.Client(
            base_url=self.loopback_url, transport=transport, headers=headers, timeout=30
        )

    def async_from_address(self, address: str, key: str | None = None) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        transport = httpx.AsyncHTTPTransport(local_address=address, verify=self.tls_context())
        return httpx.AsyncClient(
            base_url=self.loopback_url, transport=transport, headers=headers, timeout=30
        )


class ServerThread:
    def __init__(
        self,
        settings: Settings,
        *,
        port: int | None = None,
        draw: Callable[[], float] = random.random,
    ) -> None:
        self.clock = OffsetClock()
        self.services = build_services(settings, clock=self.clock, draw=draw)
        self.cert = ensure_self_signed(settings.data_dir / "tls")
        self.port = port or free_port()
        listener = dataclasses.replace(
            listener_of(settings, self.cert), host="127.0.0.1", port=self.port
        )
        self.server = Embedded(create_app(self.services), listener)
        self.thread = threading.Thread(target=self.server.serve, daemon=True)
        self.settings = settings

    def __enter__(self) -> RunningServer:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started.wait(0.02):
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("test server did not start")
        return RunningServer(
            base_url=f"https://localhost:{self.port}",
            cert=self.cert,
            services=self.services,
            clock=self.clock,
            settings=self.settings,
        )

    def __exit__(self, *exc: object) -> None:
        self.server.stop()
        self.thread.join(timeout=15)


test_settings.__test__ = False  # type: ignore[attr-defined]  # a factory, not a test
