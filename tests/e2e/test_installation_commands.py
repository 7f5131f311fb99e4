"""The CLI knows its installation: only `serve`, `migrate` and `accounts create` make
one; every other command on a missing one says so in one line and makes nothing."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest
from sqlalchemy.engine import make_url

from tests.e2e.serving import RELAY

PG_URL = os.environ.get("RELAY_TEST_DATABASE_URL")


def relay(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RELAY_")}
    return subprocess.run(
        [*RELAY, *args],
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    "command",
    [
        ["keys", "list"],
        ["keys", "revoke", "key_01M8GR85Z38CKQATJHQP6KNH9V"],
        ["usage"],
        ["accounts", "list"],
        ["accounts", "show", "acct_01M8GR85Z38CKQATJHQP6KNH9R"],
        ["accounts", "update", "acct_01M8GR85Z38CKQATJHQP6KNH9R", "--allow-countries", "US"],
        ["worker"],
    ],
    ids=lambda command: " ".join(command[:2]),
)
def test_a_command_on_a_mistyped_data_directory_says_so_in_one_line_and_makes_nothing(
    tmp_path: Path, command: list[str]
) -> None:
    typo = tmp_path / "typo"
    done = relay(*command, "--data-dir", str(typo))
    assert done.returncode == 1
    [line] = done.stderr.splitlines()
    assert line.startswith("relay: no Relay installation here")
    assert f"data directory {typo}" in line
    assert f"sqlite:///{typo}/relay.sqlite3" in line
    assert "`relay migrate`" in line
    assert done.stdout == ""
    assert not typo.exists()


@pytest.fixture
def empty_postgres_url() -> Iterator[str]:
    if not PG_URL:
        pytest.skip("needs RELAY_TEST_DATABASE_URL=postgresql://…")
    name = f"relay_empty_{os.getpid()}"
    server = make_url(PG_URL).set(drivername="postgresql")

    async def run(statement: str) -> None:
        conn = await asyncpg.connect(server.render_as_string(hide_password=False))
        try:
            await conn.execute(statement)
        finally:
            await conn.close()

    asyncio.run(run(f"CREATE DATABASE {name}"))
    try:
        yield server.set(
            database=name, username=server.username or "postgres", password="hunter2"
        ).render_as_string(hide_password=False)
    finally:
        asyncio.run(run(f"DROP DATABASE {name}"))


def test_a_postgresql_database_relay_never_migrated_is_named_with_its_password_masked(
    tmp_path: Path, empty_postgres_url: str
) -> None:
    done = relay(
        "keys", "list", "--database-url", empty_postgres_url, "--data-dir", str(tmp_path / "d")
    )
    assert done.returncode == 1
    [line] = done.stderr.splitlines()
    assert "no Relay installation here" in line
    assert ":***@" in line
    assert "hunter2" not in line
    assert not (tmp_path / "d").exists()


def test_a_database_that_cannot_be_reached_is_one_line_too(tmp_path: Path) -> None:
    url = "postgresql://relay:secret@127.0.0.1:9/relay"
    done = relay("accounts", "list", "--database-url", url, "--data-dir", str(tmp_path))
    assert done.returncode == 1
    [line] = done.stderr.splitlines()
    assert line.startswith("relay: database: ")
    assert "relay:***@127.0.0.1:9" in line


def test_accounts_list_and_show_tell_what_an_installation_holds(tmp_path: Path) -> None:
    data = ["--data-dir", str(tmp_path / "data")]
    created = json.loads(
        relay("accounts", "create", "Shop", "--brand", "ShopCo", "--json", *data).stdout
    )
    second = json.loads(relay("accounts", "create", "Bank", "--json", *data).stdout)
    saved = relay(
        "accounts",
        "template",
        "set",
        created["id"],
        "--channel",
        "sms",
        "--locale",
        "fr",
        "--text",
        "{brand}: votre code est {code}",
        *data,
    )
    assert saved.returncode == 0, saved.stderr
    relay("accounts", "update", created["id"], "--allow-countries", "FR,US", *data)
    relay("accounts", "update", created["id"], "--delete-after", "30d", *data)

    listed = [
        json.loads(line) for line in relay("accounts", "list", "--json", *data).stdout.splitlines()
    ]
    assert sorted(account["id"] for account in listed) == sorted([created["id"], second["id"]])
    text_list = relay("accounts", "list", *data).stdout
    assert created["id"] in text_list
    assert "ShopCo" in text_list
    assert "FR,US" in text_list

    shown = json.loads(relay("accounts", "show", created["id"], "--json", *data).stdout)
    assert (shown["name"], shown["brand"], shown["allowed_countries"]) == (
        "Shop",
        "ShopCo",
        ["FR", "US"],
    )
    assert {(key["mode"], key["state"]) for key in shown["keys"]} == {
        ("test", "active"),
        ("live", "active"),
    }
    assert {secret["mode"] for secret in shown["webhook_secrets"]} == {"test", "live"}
    assert all(secret["age_seconds"] >= 0 for secret in shown["webhook_secrets"])
    assert [(text["channel"], text["locale"], text["in_use"]) for text in shown["texts"]] == [
        ("sms", "fr", True)
    ]
    assert shown["limits"]["max_sends"] == 5
    assert (shown["delete_after"], shown["kept_for"]) == (30 * 86_400, "30d")
    everything = json.dumps(shown)
    for secret in (created["test_key"], created["live_key"], created["test_webhook_secret"]):
        assert secret not in everything

    text_show = relay("accounts", "show", created["id"], *data).stdout
    assert created["test_key"][-4:] in text_show
    assert "{brand}: votre code est {code}" in text_show
    assert created["test_key"] not in text_show

    unknown = relay("accounts", "show", "acct_nope", *data)
    assert unknown.returncode == 1
    assert unknown.stderr.strip() == "relay: No account acct_nope."


def test_the_help_describes_the_product_as_it_is() -> None:
    described = relay("--help").stdout
    assert "SMS, WhatsApp and email" in described
    assert "OTP by SMS," not in described
