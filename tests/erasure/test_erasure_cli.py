"""`relay erase` and `relay export` on the command line: one account (both modes) or every
account, counted per kind; an export lists every kind and never a code or a secret."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest

from relay.accounts.models import NewAccount
from relay.cli.main import main as relay_main
from relay.services import Services
from relay.web.app import RelayApp
from tests.erasure.support import (
    NUMBER,
    OTHER,
    blocked,
    client,
    delivered_webhook,
    dispatched,
    naming,
    post,
)

pytestmark = pytest.mark.asyncio

CODE = "482913"


async def relay(services: Services, capsys: Any, *args: str) -> tuple[int, list[Any]]:
    """`relay ARGS` on the services' database, and the JSON lines it printed."""
    settings = services.settings
    installation = [
        "--database-url",
        settings.resolved_database_url,
        "--data-dir",
        str(settings.data_dir),
    ]
    capsys.readouterr()
    status = await asyncio.to_thread(relay_main, [*args, *installation])
    printed = capsys.readouterr().out.splitlines()
    return status, [json.loads(line) for line in printed]


async def test_relay_erase_deletes_one_accounts_rows_in_both_modes_then_every_accounts(
    services: Services, app: RelayApp, account: NewAccount, capsys: Any
) -> None:
    other = await services.accounts.create_account("Other")
    for key in (account.test_key, account.live_key, other.test_key):
        async with client(app, key) as api:
            await post(api, "/v1/verifications", to=NUMBER)
    async with client(app, account.test_key) as api:
        await post(api, "/v1/verifications", to=OTHER)

    status, [erased] = await relay(
        services, capsys, "erase", "--to", NUMBER, "--account", account.id
    )

    assert status == 0
    assert erased["to"] == "+1415…23"
    assert erased["account"] == account.id
    assert erased["deleted"]["verifications"] == 2
    assert erased["deleted"]["attempts"] == 2
    assert (await naming(services, NUMBER))["verifications"] == 1

    status, [erased] = await relay(services, capsys, "erase", "--to", NUMBER)
    assert (status, erased["account"], erased["deleted"]["verifications"]) == (0, None, 1)
    assert (await naming(services, NUMBER))["verifications"] == 0
    assert (await naming(services, OTHER))["verifications"] == 1


async def test_relay_erase_refuses_a_destination_that_is_neither_a_number_nor_an_address(
    services: Services, capsys: Any
) -> None:
    settings = services.settings
    installation = ["--database-url", settings.resolved_database_url]
    installation += ["--data-dir", str(settings.data_dir)]
    status = await asyncio.to_thread(relay_main, ["erase", "--to", "0800 FLOWERS", *installation])
    assert status == 1
    assert "E.164" in capsys.readouterr().err


async def test_relay_export_lists_every_kind_of_record_and_no_code_or_secret(
    services: Services, app: RelayApp, account: NewAccount, capsys: Any
) -> None:
    async with client(app, account.live_key) as api:
        created = await api.post(
            "/v1/verifications", json={"to": NUMBER}, headers={"Idempotency-Key": "exported"}
        )
        verification = created.json()
        await post(api, "/v1/messages", to=NUMBER, code=CODE)
        await dispatched(services)
        await post(api, "/v1/verifications/check", id=verification["id"], code="000000")
    await delivered_webhook(services, verification["id"])
    await blocked(services, account, NUMBER, livemode=True)
    before = await naming(services, NUMBER)

    status, records = await relay(services, capsys, "export", "--to", NUMBER)

    assert status == 0
    kinds = [record["kind"] for record in records]
    assert set(kinds) == {
        "verification",
        "message",
        "attempt",
        "event",
        "webhook_attempt",
        "idempotency_key",
        "counter",
        "block",
    }
    assert kinds.count("attempt") == before["attempts"]
    assert kinds.count("event") == before["events"]
    for record in records:
        assert "code_mac" not in record
        assert "sealed_code" not in record
        assert CODE not in json.dumps(record)
    [exported] = [r for r in records if r["kind"] == "verification"]
    assert (exported["id"], exported["to_number"], exported["livemode"]) == (
        verification["id"],
        NUMBER,
        True,
    )
    # An export deletes nothing.
    assert await naming(services, NUMBER) == before


async def test_an_email_address_is_erased_in_every_spelling_of_its_mailbox(
    services: Services, app: RelayApp, account: NewAccount, caplog: pytest.LogCaptureFixture
) -> None:
    async with client(app, account.test_key) as api:
        sent = await api.post(
            "/v1/verifications", json={"to": "Jane+promo@Example.com", "channels": ["email"]}
        )
        assert sent.status_code == 200, sent.text
        with caplog.at_level(logging.INFO, logger="relay.erasure"):
            erased = await post(api, "/v1/erasures", to="jane@example.com")

    assert erased["to"] == "j…@example.com"
    assert erased["deleted"]["verifications"] == 1
    [line] = [r.getMessage() for r in caplog.records if r.name == "relay.erasure"]
    assert f"account={account.id}" in line
    assert "to=j…@example.com" in line
    assert "jane@" not in line
