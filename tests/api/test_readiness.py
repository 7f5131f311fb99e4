"""`/readyz`: 200 when the database answers at the migrations' head, 503 naming what does not.

`/healthz` stays a liveness probe: it answers while the database is away.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.engine import make_url

from relay.db.urls import is_postgres, sqlite_path
from tests.harness import RunningServer, ServerThread, free_port, test_settings
from tests.tcp_proxy import Proxy
from tests.webhooks.receiver import isolated_database


class Outage:
    """Takes the server's database away and brings it back, for either database."""

    def __init__(self, url: str, proxy: Proxy | None) -> None:
        self.url = url
        self.proxy = proxy

    def begin(self) -> None:
        if self.proxy is not None:
            self.proxy.cut()
        else:
            path = sqlite_path(self.url)
            os.rename(path, path + ".away")

    def end(self) -> None:
        if self.proxy is not None:
            self.proxy.restore()
        else:
            path = sqlite_path(self.url)
            os.rename(path + ".away", path)


@pytest.fixture
def served(tmp_path: Path, database_url: str) -> Iterator[tuple[RunningServer, Outage]]:
    url = isolated_database(database_url, "readyz", tmp_path)
    proxy = None
    if is_postgres(url):
        parsed = make_url(url)
        proxy = Proxy((parsed.host or "127.0.0.1", parsed.port or 5432))
        proxy.start()
        url = parsed.set(port=proxy.port).render_as_string(hide_password=False)
    settings = test_settings(tmp_path / "data", url, sweep_interval=0.2)
    try:
        with ServerThread(settings) as server:
            yield server, Outage(url, proxy)
    finally:
        if proxy is not None:
            proxy.cut()


def get(server: RunningServer, path: str) -> httpx.Response:
    with server.client(None) as client:
        return client.get(path)


def error_of(response: httpx.Response) -> dict[str, Any]:
    body: dict[str, Any] = response.json()["error"]
    return body


def test_a_ready_server_answers_200_with_each_check(
    served: tuple[RunningServer, Outage],
) -> None:
    server, _ = served
    ready = get(server, "/readyz")
    assert ready.status_code == 200
    assert ready.json()["ok"] is True
    assert set(ready.json()["checks"]) == {
        "database",
        "migrations",
        "carriers",
        "rate_limit_storage",
    }
    assert ready.json()["checks"]["rate_limit_storage"] == "in process"


def test_an_unreachable_database_is_503_named_and_200_again_once_it_returns(
    served: tuple[RunningServer, Outage],
) -> None:
    server, outage = served
    assert get(server, "/readyz").status_code == 200
    outage.begin()
    try:
        down = get(server, "/readyz")
        assert down.status_code == 503
        assert error_of(down)["type"] == "api_error"
        assert error_of(down)["code"] == "not_ready"
        assert error_of(down)["message"].startswith("Not ready: database:")
        assert get(server, "/healthz").status_code == 200
    finally:
        outage.end()
    # The same process, no restart: a pooled connection the outage broke may fail
    # one more check before the pool replaces it.
    answers = [get(server, "/readyz").status_code for _ in range(5)]
    assert answers[-1] == 200, answers


def test_a_database_behind_the_code_is_503_naming_the_migrations(
    served: tuple[RunningServer, Outage],
) -> None:
    server, _ = served
    from relay.db.migrate import downgrade, upgrade

    downgrade(server.settings.resolved_database_url, "0003")
    try:
        behind = get(server, "/readyz")
        assert behind.status_code == 503
        assert error_of(behind)["message"].startswith("Not ready: migrations:")
        assert "0003" in error_of(behind)["message"]
    finally:
        upgrade(server.settings.resolved_database_url)
    assert get(server, "/readyz").status_code == 200


def test_the_ready_and_the_not_ready_answers_both_name_the_installed_version(
    served: tuple[RunningServer, Outage],
) -> None:
    server, _ = served
    from relay.db.migrate import downgrade, upgrade

    installed = version("relay-otp")
    ready = get(server, "/readyz")
    assert ready.status_code == 200
    assert ready.json()["version"] == installed
    downgrade(server.settings.resolved_database_url, "0003")
    try:
        behind = get(server, "/readyz")
    finally:
        upgrade(server.settings.resolved_database_url)
    assert behind.status_code == 503
    assert behind.json()["version"] == installed
    assert error_of(behind)["code"] == "not_ready"


def test_a_live_carrier_that_is_not_bound_is_503_naming_it(
    tmp_path: Path, database_url: str
) -> None:
    url = isolated_database(database_url, "readyz_carrier", tmp_path)
    nobody = free_port()  # nothing listens there: the bind cannot come up
    carrier = {"kind": "smpp", "host": "127.0.0.1", "port": nobody, "system_id": "relay"}
    settings = test_settings(
        tmp_path / "data",
        url,
        carriers={"operator-a": {**carrier, "password": "pw"}},
        routes={"default": ["operator-a"]},
    )
    with ServerThread(settings) as server:
        unbound = get(server, "/readyz")
    assert unbound.status_code == 503
    assert error_of(unbound)["message"] == "Not ready: carriers: not bound: operator-a."
