"""Retention over HTTPS: what is past its account's `delete_after` is gone as if it never
was, what is still pending stays, and every figure reads the same after a prune."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest

from relay.accounts.models import NewAccount
from relay.carriers.measured import tally as measured_tally
from relay.cli.main import main as relay_main
from relay.console import store as console_store
from relay.console.scope import View
from relay.delivery import figures
from relay.retention.prune import prune
from relay.retention.store import prune_batch
from relay.services import Services, build_services
from relay.worker.sweeper import retention_once
from tests.harness import (
    RunningServer,
    count_rows,
    create_account,
    read_db,
    run,
    using_services,
)
from tests.webhooks.receiver import (
    Identity,
    Receiver,
    events_of,
    isolated_database,
    settled,
    wait_until,
    webhook_server,
)

DELIVERED = "+15005550006"
UNDELIVERABLE = "+15005550002"
_numbers = itertools.count(2000)


def mobile() -> str:
    return f"+1415557{next(_numbers) % 10000:04d}"


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, database_url: str, identity: Identity
) -> Iterator[RunningServer]:
    url = isolated_database(database_url, "retention_api", tmp_path_factory.mktemp("db"))
    with webhook_server(
        tmp_path_factory.mktemp("data"),
        url,
        identity,
        delete_after="4s",
        retention_interval="1s",
        carriers={"live-a": {"kind": "sandbox"}, "live-b": {"kind": "sandbox"}},
        routes={"default": ["live-a", "live-b"]},
    ) as running:
        yield running


def closed_verification(api: httpx.Client, to: str | None = None, **fields: Any) -> str:
    created = api.post("/v1/verifications", json={"to": to or mobile(), **fields})
    assert created.status_code == 200, created.text
    verification_id: str = created.json()["id"]
    canceled = api.post(f"/v1/verifications/{verification_id}/cancel")
    assert canceled.status_code == 200, canceled.text
    return verification_id


def sent_message(api: httpx.Client, to: str, **fields: Any) -> str:
    sent = api.post("/v1/messages", json={"to": to, "code": "482913", **fields})
    assert sent.status_code == 200, sent.text
    message_id: str = sent.json()["id"]
    return message_id


def later(server: RunningServer, seconds: float) -> int:
    """Move the server's clock on, and run one retention prune at that moment."""
    server.clock.offset += timedelta(seconds=seconds)

    async def once(services: Services) -> int:
        return await retention_once(services)

    return int(run(_with_clock(server, once)))


async def _with_clock(server: RunningServer, use: Any) -> Any:
    services = build_services(server.settings, clock=server.clock)
    try:
        return await use(services)
    finally:
        await services.close()


def installation(server: RunningServer) -> list[str]:
    """The server's database and data directory, as a command on its machine names them."""
    settings = server.settings
    return ["--database-url", settings.resolved_database_url, "--data-dir", str(settings.data_dir)]


def usage_printed(server: RunningServer, capsys: Any, account: NewAccount) -> list[Any]:
    capsys.readouterr()
    assert relay_main(["usage", *installation(server), "--account", account.id, "--json"]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


SQL_UNSETTLED = (
    "SELECT count(*) AS n FROM attempts WHERE status IN ('queued', 'sent')"
    " UNION ALL SELECT count(*) FROM events WHERE delivery_status = 'pending'"
)


def console_figures(server: RunningServer, ends: datetime) -> Any:
    """The console's overview of the hour before `ends` for every account, and measured
    routing's figures of that hour: windows of whole minutes, as the console and routing
    read them."""
    since = ends - timedelta(hours=1)

    async def read(tx: Any) -> Any:
        overview = await console_store.overview(
            tx, View(None, None), since=since, step=300, buckets=12
        )
        measured = await figures.read(tx, since=since, until=ends)
        return overview, measured_tally(measured)

    return read_db(server.settings, read)


def test_a_closed_verification_is_retrievable_then_gone_after_its_window(
    server: RunningServer, api: httpx.Client
) -> None:
    verification_id = closed_verification(api)
    assert api.get(f"/v1/verifications/{verification_id}").status_code == 200
    assert events_of(api, verification_id) != []

    # The server's own sweeper: delete_after 4 s, a look every second.
    wait_until(
        lambda: api.get(f"/v1/verifications/{verification_id}").status_code == 404,
        timeout=15,
        what="the sweeper to delete the verification",
        interval=0.2,
    )
    gone = api.get(f"/v1/verifications/{verification_id}")
    unknown = api.get("/v1/verifications/ver_01M8GR9714EVDHRX2EHVMFNAAG")
    assert (gone.status_code, gone.json()["error"]["code"]) == (
        unknown.status_code,
        unknown.json()["error"]["code"],
    )
    assert events_of(api, verification_id) == []
    listed = api.get("/v1/verifications", params={"limit": 100}).json()["data"]
    assert verification_id not in [v["id"] for v in listed]


def test_usage_the_console_and_measured_routing_read_the_same_after_a_prune(
    server: RunningServer,
    api: httpx.Client,
    live_api: httpx.Client,
    account: NewAccount,
    receiver: Receiver,
    capsys: Any,
) -> None:
    hook = {"webhook_url": receiver.url("/retention")}
    deleted = [closed_verification(live_api, **hook), closed_verification(live_api)]
    deleted += [closed_verification(api, DELIVERED), closed_verification(api, UNDELIVERABLE)]
    messages = [sent_message(live_api, "+447400123456", **hook), sent_message(api, DELIVERED)]
    for some_id in [*deleted, *messages]:
        settled(live_api if some_id in (deleted[:2] + messages[:1]) else api, some_id, 1)
    wait_until(
        lambda: count_rows(server.settings, SQL_UNSETTLED) == 0, what="every attempt to settle"
    )
    ends = server.clock.now().replace(second=0, microsecond=0) + timedelta(minutes=2)
    usage_before = usage_printed(server, capsys, account)
    figures_before = console_figures(server, ends)
    overview, measured = figures_before
    every_figure: list[Any] = [overview.verifications, overview.attempts, overview.receipts]
    every_figure += [overview.countries, overview.delivery, overview.webhooks]
    every_figure += [overview.webhook_attempts, measured, usage_before]
    assert all(every_figure), "each figure has rows a prune could lose"

    later(server, 10)
    for kind, found in (("verifications", deleted), ("messages", messages)):
        for some_id in found:
            assert live_api.get(f"/v1/{kind}/{some_id}").status_code == 404
            assert api.get(f"/v1/{kind}/{some_id}").status_code == 404

    assert usage_printed(server, capsys, account) == usage_before
    assert console_figures(server, ends) == figures_before


def test_an_accounts_own_delete_after_wins_over_the_setting(
    server: RunningServer, api: httpx.Client
) -> None:
    keeping = create_account(server.settings, "Keeps a day")
    using_services(server.settings, lambda s: s.accounts.set_delete_after(keeping.id, 86_400))
    with server.client(keeping.test_key) as own:
        kept = closed_verification(own)
        dropped = closed_verification(api)
        later(server, 3600)
        assert own.get(f"/v1/verifications/{kept}").status_code == 200
        assert api.get(f"/v1/verifications/{dropped}").status_code == 404
        later(server, 86_400)
        assert own.get(f"/v1/verifications/{kept}").status_code == 404


def test_an_account_keeping_less_than_the_setting_loses_its_rows_sooner(
    server: RunningServer,
) -> None:
    brief = create_account(server.settings, "Keeps a second")
    using_services(server.settings, lambda s: s.accounts.set_delete_after(brief.id, 1))
    with server.client(brief.test_key) as own:
        verification_id = closed_verification(own)
        later(server, 2)
        assert own.get(f"/v1/verifications/{verification_id}").status_code == 404


def test_the_stored_answer_of_a_keyed_create_goes_with_its_verification(
    server: RunningServer, account: NewAccount, api: httpx.Client
) -> None:
    created = api.post(
        "/v1/verifications", json={"to": mobile()}, headers={"Idempotency-Key": "retention-1"}
    )
    verification_id = created.json()["id"]
    assert api.post(f"/v1/verifications/{verification_id}/cancel").status_code == 200
    stored = "SELECT count(*) AS n FROM idempotency_keys WHERE account_id = :account"
    assert count_rows(server.settings, stored, account=account.id) == 1
    later(server, 10)
    assert api.get(f"/v1/verifications/{verification_id}").status_code == 404
    assert count_rows(server.settings, stored, account=account.id) == 0


def test_a_pending_verification_survives_its_window(
    server: RunningServer, api: httpx.Client
) -> None:
    created = api.post("/v1/verifications", json={"to": mobile()})
    pending_id = created.json()["id"]
    later(server, 60)
    still = api.get(f"/v1/verifications/{pending_id}")
    assert (still.status_code, still.json()["status"]) == (200, "pending")


def test_one_batch_deletes_at_most_its_size_and_the_prune_takes_batches_until_none_is_left(
    server: RunningServer, account: NewAccount, api: httpx.Client
) -> None:
    # A day of its own: the server's sweeper leaves these rows to the prunes run here.
    using_services(server.settings, lambda s: s.accounts.set_delete_after(account.id, 86_400))
    created = [closed_verification(api) for _ in range(7)]
    two_days_on = server.clock.now() + timedelta(days=2)
    cutoff = two_days_on - timedelta(days=1)

    async def one_batch_of_three(services: Services) -> int:
        return int(
            await services.db.write(
                lambda tx: prune_batch(
                    tx, messages=False, account_id=account.id, cutoff=cutoff, limit=3
                )
            )
        )

    assert run(_with_clock(server, one_batch_of_three)) == 3
    assert verifications_of(server, account) == 4

    async def in_batches_of_three(services: Services) -> int:
        return await prune(services.db, now=two_days_on, delete_after=4, batch=3)

    # Other accounts' rows may be due too; this account's last four are deleted.
    assert run(_with_clock(server, in_batches_of_three)) >= 4
    assert verifications_of(server, account) == 0
    assert all(api.get(f"/v1/verifications/{v}").status_code == 404 for v in created)


def test_two_prunes_at_once_count_each_deleted_verification_once(
    server: RunningServer, account: NewAccount, api: httpx.Client
) -> None:
    using_services(server.settings, lambda s: s.accounts.set_delete_after(account.id, 86_400))
    created = [closed_verification(api) for _ in range(8)]
    two_days_on = server.clock.now() + timedelta(days=2)

    async def two_processes_at_once() -> None:
        first, second = build_services(server.settings), build_services(server.settings)
        try:
            await asyncio.gather(
                *(prune(s.db, now=two_days_on, delete_after=4, batch=2) for s in (first, second))
            )
        finally:
            await first.close()
            await second.close()

    run(two_processes_at_once())
    assert verifications_of(server, account) == 0
    retained = (
        "SELECT SUM(n) AS n FROM retained_figures"
        " WHERE kind = 'verification' AND account_id = :account"
    )
    assert count_rows(server.settings, retained, account=account.id) == len(created)


def verifications_of(server: RunningServer, account: NewAccount) -> int:
    return count_rows(
        server.settings,
        "SELECT count(*) AS n FROM verifications WHERE account_id = :account",
        account=account.id,
    )


def test_the_command_line_sets_and_clears_an_accounts_delete_after(
    server: RunningServer, account: NewAccount, capsys: Any
) -> None:
    update = ["accounts", "update", account.id, *installation(server)]
    assert relay_main([*update, "--delete-after", "30d"]) == 0
    assert "after: 30d" in capsys.readouterr().out
    assert stored_delete_after(server, account) == 30 * 86_400
    assert relay_main([*update, "--delete-after", "3 months"]) == 2
    assert "m (minutes)" in capsys.readouterr().err
    assert relay_main([*update, "--delete-after", "default"]) == 0
    assert stored_delete_after(server, account) is None


def test_live_mode_refuses_an_accounts_delete_after_under_an_hour(
    server: RunningServer, account: NewAccount, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RELAY_MODE", "live")
    update = ["accounts", "update", account.id, *installation(server), "--delete-after"]
    assert relay_main([*update, "59m"]) == 2
    assert "under an hour is refused in live mode" in capsys.readouterr().err
    assert stored_delete_after(server, account) is None
    assert relay_main([*update, "1h"]) == 0
    assert stored_delete_after(server, account) == 3600


def stored_delete_after(server: RunningServer, account: NewAccount) -> int | None:
    from relay.db.sql import Sql

    async def read(tx: Any) -> int | None:
        row = await tx.fetchrow(
            Sql("SELECT delete_after FROM accounts WHERE id = :id"), {"id": account.id}
        )
        return None if row["delete_after"] is None else int(row["delete_after"])

    return read_db(server.settings, read)
