"""A running `relay serve` keeps the keys it authenticated, and a `relay` command run in
another process changes what its very next request meets: in the one process on SQLite,
in both of two workers on PostgreSQL."""

from __future__ import annotations

import asyncio
import itertools
import json
import subprocess
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import asyncpg
import httpx
import pytest

from relay.db.urls import is_postgres
from tests.e2e.serving import RELAY, Serving, relay_serve
from tests.e2e.test_serve_workers import _pids_serving
from tests.webhooks.receiver import isolated_database

URL = "/v1/verifications"
# Each on its own connection, all open at once, so that every worker answers some.
CONNECTIONS = 24
# Taken by the server; the commands that set texts allow more.
SERVED_SEGMENTS = "1"
TWO_SEGMENTS = "{brand}: your code is {code}. " + "It expires soon; never share it. " * 5

_numbers = itertools.count(1000)
NUMBER = "+14155550100"


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory, database_url: str) -> str:
    """A database of its own: the suite's shared server listens on the shared one."""
    return isolated_database(database_url, "key_changes", tmp_path_factory.mktemp("db"))


@pytest.fixture(scope="module")
def serving(
    tmp_path_factory: pytest.TempPathFactory, database: str
) -> Iterator[tuple[Serving, int]]:
    workers = 2 if is_postgres(database) else 1
    tmp = tmp_path_factory.mktemp("key_changes")
    # Many codes to one range, none used, is what the pumping guard is for: not what is
    # tested here.
    with relay_serve(
        tmp,
        database,
        workers=workers,
        RELAY_MAX_SEGMENTS=SERVED_SEGMENTS,
        RELAY_PUMPING_GUARD="off",
    ) as running:
        yield running, workers


def command(serving: Serving, *args: str, **env: str) -> str:
    """What `relay ARGS` printed, run in a process of its own on the server's data and
    database; it has exited when this returns."""
    done = subprocess.run(
        [*RELAY, *args],
        env={**serving.environment, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout


def relay(serving: Serving, *args: str) -> Any:
    return [json.loads(line) for line in command(serving, *args, "--json").splitlines()]


def new_account(serving: Serving) -> tuple[str, str, str]:
    """A fresh account: its id, its test key's id, and that key."""
    [made] = relay(serving, "accounts", "create", "Acme")
    listed = relay(serving, "keys", "list", "--account", made["id"])
    [key] = [key for key in listed if key["redacted"].endswith(made["test_key"][-4:])]
    return made["id"], key["id"], made["test_key"]


def at_once(
    running: tuple[Serving, int], key: str, request: Callable[[httpx.Client], Any]
) -> list[Any]:
    """`request` on CONNECTIONS connections at once, each new; every worker answered some."""
    serving, workers = running
    clients = [serving.client(key) for _ in range(CONNECTIONS)]
    try:
        with ThreadPoolExecutor(max_workers=CONNECTIONS) as pool:
            answers = list(pool.map(request, clients))
        port = int(serving.base_url.rsplit(":", 1)[1])
        assert len(_pids_serving(port)) == workers
    finally:
        for client in clients:
            client.close()
    return answers


def statuses(running: tuple[Serving, int], key: str) -> set[int]:
    return set(at_once(running, key, lambda client: client.get(URL).status_code))


def sent(client: httpx.Client) -> tuple[str, str | None]:
    created = client.post(URL, json={"to": f"+1415555{next(_numbers):04d}", "locale": "en"})
    assert created.status_code == 200, created.text
    attempt = created.json()["attempts"][0]
    return attempt["status"], (attempt["error"] or {}).get("code")


def test_a_key_revoked_by_the_command_is_refused_at_the_next_request_in_every_process(
    serving: tuple[Serving, int],
) -> None:
    _, key_id, secret = new_account(serving[0])
    assert statuses(serving, secret) == {200}
    relay(serving[0], "keys", "revoke", key_id)
    assert statuses(serving, secret) == {401}


def test_a_key_rolled_without_overlap_is_refused_at_once_and_its_successor_answers(
    serving: tuple[Serving, int],
) -> None:
    _, key_id, secret = new_account(serving[0])
    assert statuses(serving, secret) == {200}
    [rolled] = relay(serving[0], "keys", "roll", key_id, "--overlap", "0")
    assert statuses(serving, secret) == {401}
    assert statuses(serving, rolled["secret"]) == {200}


def test_ranges_set_by_the_command_are_met_at_the_next_request_in_every_process(
    serving: tuple[Serving, int],
) -> None:
    _, key_id, secret = new_account(serving[0])
    assert statuses(serving, secret) == {200}
    relay(serving[0], "keys", "restrict", key_id, "--networks", "10.0.0.0/8")
    assert statuses(serving, secret) == {401}
    relay(serving[0], "keys", "restrict", key_id, "--networks", "127.0.0.0/8")
    assert statuses(serving, secret) == {200}


def test_a_text_set_by_the_command_is_used_by_the_next_send_in_every_process(
    serving: tuple[Serving, int],
) -> None:
    account, _, secret = new_account(serving[0])
    assert set(at_once(serving, secret, sent)) == {("delivered", None)}
    where = ("--channel", "sms", "--locale", "en")
    # Allowed where it is set; over what the server sends, so its sends now fail unsent.
    command(
        serving[0],
        *("accounts", "template", "set", account, *where, "--text", TWO_SEGMENTS),
        RELAY_MAX_SEGMENTS="3",
    )
    assert set(at_once(serving, secret, sent)) == {("failed", "sms_too_long")}
    command(serving[0], "accounts", "template", "delete", account, *where)
    assert set(at_once(serving, secret, sent)) == {("delivered", None)}


def test_countries_set_by_the_command_are_met_at_the_next_send_in_every_process(
    serving: tuple[Serving, int],
) -> None:
    account, _, secret = new_account(serving[0])
    assert set(at_once(serving, secret, sent)) == {("delivered", None)}
    command(serving[0], "accounts", "update", account, "--allow-countries", "FR")
    refused = at_once(serving, secret, lambda client: client.post(URL, json={"to": NUMBER}))
    codes = {(answer.status_code, answer.json()["error"]["code"]) for answer in refused}
    assert codes == {(400, "country_not_allowed")}


async def _listeners(database_url: str, *, terminate: bool = False) -> list[str]:
    """The application names of the connections listening for key changes; ended first
    when `terminate` (what PostgreSQL's restart, or a cut connection, does to them)."""
    connection = await asyncpg.connect(database_url)
    try:
        rows = await connection.fetch(
            "SELECT pid, application_name FROM pg_stat_activity"
            " WHERE datname = current_database() AND application_name LIKE 'relay-keys %'"
        )
        if terminate:
            for row in rows:
                await connection.execute("SELECT pg_terminate_backend($1)", row["pid"])
    finally:
        await connection.close()
    return [row["application_name"] for row in rows]


def test_with_their_listeners_cut_the_workers_still_refuse_a_revoked_key_and_listen_again(
    serving: tuple[Serving, int], database: str
) -> None:
    if not is_postgres(database):
        pytest.skip("LISTEN/NOTIFY: PostgreSQL only")
    _, key_id, secret = new_account(serving[0])
    assert statuses(serving, secret) == {200}
    assert len(asyncio.run(_listeners(database, terminate=True))) == serving[1]
    relay(serving[0], "keys", "revoke", key_id)
    assert statuses(serving, secret) == {401}
    deadline = time.monotonic() + 30
    while len(asyncio.run(_listeners(database))) < serving[1]:
        assert time.monotonic() < deadline, "the workers did not listen again"
        time.sleep(0.1)
    _, key_id, secret = new_account(serving[0])
    assert statuses(serving, secret) == {200}
    relay(serving[0], "keys", "revoke", key_id)
    assert statuses(serving, secret) == {401}
