"""Erasure over the API: every row of the key's account and mode that names a destination
is deleted and counted, a pending send never leaves, nothing else is touched, and the
figures read the same."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from relay.accounts.models import NewAccount
from relay.console import store as console_store
from relay.console.scope import View
from relay.db.sql import Sql, Tx
from relay.services import Services, build_services
from relay.web.app import RelayApp, create_app
from tests.harness import test_settings
from tests.webhooks.receiver import isolated_database

pytestmark = pytest.mark.asyncio

NUMBER = "+14155550123"
OTHER = "+14155550199"
DELIVERED = "+15005550006"

# What names a destination, per kind, counted the way a reader of the tables would.
_OWNERS = (
    "SELECT id FROM verifications WHERE to_number = :to"
    " UNION ALL SELECT id FROM messages WHERE to_number = :to"
)
NAMING = {
    "verifications": "SELECT count(*) AS n FROM verifications WHERE to_number = :to",
    "messages": "SELECT count(*) AS n FROM messages WHERE to_number = :to",
    "attempts": f"SELECT count(*) AS n FROM attempts WHERE verification_id IN ({_OWNERS})"
    f" OR message_id IN ({_OWNERS})",
    "events": f"SELECT count(*) AS n FROM events WHERE related_id IN ({_OWNERS})",
    "webhook_attempts": "SELECT count(*) AS n FROM webhook_attempts WHERE event_id IN"
    f" (SELECT id FROM events WHERE related_id IN ({_OWNERS}))",
    "idempotency_keys": "SELECT count(*) AS n FROM idempotency_keys WHERE resource_path IN"
    f" (SELECT '/v1/verifications/' || id FROM ({_OWNERS}) o)"
    f" OR resource_path IN (SELECT '/v1/messages/' || id FROM ({_OWNERS}) o)",
    "counters": "SELECT (SELECT count(*) FROM abuse_counters WHERE kind = 'number'"
    " AND subject = :to) + (SELECT count(*) FROM destination_blocks WHERE kind = 'number'"
    " AND subject = :to) AS n",
}


@pytest_asyncio.fixture
async def services(tmp_path: Path, database_url: str) -> AsyncIterator[Services]:
    url = await asyncio.to_thread(isolated_database, database_url, "erasure", tmp_path)
    built = build_services(
        test_settings(
            tmp_path,
            url,
            carriers={"live-a": {"kind": "sandbox"}},
            routes={"default": ["live-a"]},
        )
    )
    # Nothing is sent unless a test dispatches: a create's attempt stays queued.
    await built.delivery.start(dispatch=False)
    await built.accounts.start()
    try:
        yield built
    finally:
        await built.close()


@pytest_asyncio.fixture
async def account(services: Services) -> NewAccount:
    return await services.accounts.create_account("Acme")


@pytest.fixture
def app(services: Services) -> RelayApp:
    return create_app(services, background=False)


def client(app: RelayApp, key: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="https://relay.test",
        headers={"Authorization": f"Bearer {key}"},
    )


async def count(services: Services, sql: str, **params: Any) -> int:
    async def read(tx: Tx) -> int:
        row = await tx.fetchrow(Sql(sql), params)
        assert row is not None
        return int(row["n"])

    return await services.db.read(read)


async def naming(services: Services, to: str) -> dict[str, int]:
    return {kind: await count(services, sql, to=to) for kind, sql in NAMING.items()}


async def post(api: httpx.AsyncClient, path: str, **body: Any) -> dict[str, Any]:
    answer = await api.post(path, json=body)
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()
    return found


async def dispatched(services: Services) -> None:
    """What the dispatcher of a serving process would do now: send every queued attempt."""
    for job in await services.delivery.claim(limit=10, busy=[]):
        await services.delivery.dispatch(job)


async def delivered_webhook(services: Services, verification_id: str) -> None:
    """A webhook delivery of the verification's first event, and a block of its number, as
    the webhook worker and the pumping guard leave them."""
    now = services.clock.now()

    async def write(tx: Tx) -> None:
        await tx.execute(
            Sql(
                "INSERT INTO webhook_attempts (event_id, number, at, status_code)"
                " SELECT MIN(id), 1, :now, 200 FROM events WHERE related_id = :id"
            ),
            {"id": verification_id, "now": now},
        )

    await services.db.write(write)


async def blocked(services: Services, account: NewAccount, to: str, *, livemode: bool) -> None:
    now = services.clock.now()

    async def write(tx: Tx) -> None:
        await tx.execute(
            Sql(
                "INSERT INTO destination_blocks (account_id, livemode, kind, subject,"
                " blocked_until, created_at) VALUES (:account, :livemode, 'number', :to, :until,"
                " :now)"
            ),
            {
                "account": account.id,
                "livemode": livemode,
                "to": to,
                "until": now + timedelta(hours=1),
                "now": now,
            },
        )

    await services.db.write(write)


async def test_an_erasure_deletes_every_row_naming_the_destination_and_counts_each_kind(
    services: Services, app: RelayApp, account: NewAccount
) -> None:
    async with client(app, account.test_key) as api:
        keyed = await api.post(
            "/v1/verifications", json={"to": NUMBER}, headers={"Idempotency-Key": "first"}
        )
        assert keyed.status_code == 200, keyed.text
        verification = keyed.json()
        message = await post(api, "/v1/messages", to=NUMBER, code="482913")
        await dispatched(services)
        await post(api, f"/v1/verifications/{verification['id']}/cancel")
        await delivered_webhook(services, verification["id"])
        await blocked(services, account, NUMBER, livemode=False)
        before = await naming(services, NUMBER)

        erased = await api.post("/v1/erasures", json={"to": NUMBER})

        assert erased.status_code == 200, erased.text
        assert erased.json() == {
            "object": "erasure",
            "livemode": False,
            "to": "+1415…23",
            "deleted": before,
        }
        assert before["verifications"] == before["messages"] == 1
        assert before["attempts"] == 2
        assert before["webhook_attempts"] == before["idempotency_keys"] == 1
        assert before["events"] >= 2 and before["counters"] >= 1
        assert await naming(services, NUMBER) == dict.fromkeys(NAMING, 0)
        for path in (f"/v1/verifications/{verification['id']}", f"/v1/messages/{message['id']}"):
            assert (await api.get(path)).status_code == 404


async def test_a_pending_verification_is_erased_and_its_queued_attempt_never_sent(
    services: Services, app: RelayApp, account: NewAccount
) -> None:
    async with client(app, account.test_key) as api:
        pending = await post(api, "/v1/verifications", to=DELIVERED)
        assert (pending["status"], pending["attempts"][0]["status"]) == ("pending", "queued")
        assert (await api.post("/v1/erasures", json={"to": DELIVERED})).status_code == 200

    assert await services.delivery.claim(limit=10, busy=[]) == []
    # A new verification for the number is a new one: nothing of the old is left to resend.
    async with client(app, account.test_key) as api:
        again = await post(api, "/v1/verifications", to=DELIVERED)
    assert again["id"] != pending["id"]
    [job] = await services.delivery.claim(limit=10, busy=[])
    assert job is not None


async def test_a_test_key_erases_only_test_data_and_a_live_key_only_live_data(
    services: Services, app: RelayApp, account: NewAccount
) -> None:
    async with client(app, account.test_key) as test, client(app, account.live_key) as live:
        in_test = await post(test, "/v1/verifications", to=NUMBER)
        in_live = await post(live, "/v1/verifications", to=NUMBER)

        erased = await post(test, "/v1/erasures", to=NUMBER)
        assert (erased["livemode"], erased["deleted"]["verifications"]) == (False, 1)
        assert (await test.get(f"/v1/verifications/{in_test['id']}")).status_code == 404
        assert (await live.get(f"/v1/verifications/{in_live['id']}")).status_code == 200

        erased = await post(live, "/v1/erasures", to=NUMBER)
        assert (erased["livemode"], erased["deleted"]["verifications"]) == (True, 1)
        assert (await live.get(f"/v1/verifications/{in_live['id']}")).status_code == 404


async def test_another_destination_and_another_account_are_untouched(
    services: Services, app: RelayApp, account: NewAccount
) -> None:
    other_account = await services.accounts.create_account("Other")
    async with client(app, account.test_key) as api, client(app, other_account.test_key) as own:
        kept = await post(api, "/v1/verifications", to=OTHER)
        theirs = await post(own, "/v1/verifications", to=NUMBER)
        await post(api, "/v1/verifications", to=NUMBER)
        others_before = await naming(services, OTHER)

        await post(api, "/v1/erasures", to=NUMBER)

        assert await naming(services, OTHER) == others_before
        assert (await api.get(f"/v1/verifications/{kept['id']}")).status_code == 200
        assert (await own.get(f"/v1/verifications/{theirs['id']}")).status_code == 200
        assert (await naming(services, NUMBER))["verifications"] == 1


async def test_the_figures_read_the_same_after_an_erasure(
    services: Services, app: RelayApp, account: NewAccount
) -> None:
    async with client(app, account.live_key) as live, client(app, account.test_key) as test:
        in_live = await post(live, "/v1/verifications", to=NUMBER)
        await post(test, "/v1/verifications", to=DELIVERED)
        await dispatched(services)
        # A wrong code: the number's own limit counter.
        await post(live, "/v1/verifications/check", id=in_live["id"], code="000000")
        ends = services.clock.now().replace(second=0, microsecond=0) + timedelta(minutes=2)
        before = await figures(services, ends)
        assert before[0].verifications and before[1], "figures a deletion could lose"

        live_erasure = await post(live, "/v1/erasures", to=NUMBER)
        await post(test, "/v1/erasures", to=DELIVERED)

    # The number's limit counter went with it; the account's and the country's stay.
    assert live_erasure["deleted"]["counters"] == 1

    assert (await naming(services, NUMBER))["verifications"] == 0
    assert await figures(services, ends) == before


async def figures(services: Services, ends: Any) -> tuple[Any, Any]:
    from relay.delivery.usage import usage_rows

    async def read(tx: Tx) -> tuple[Any, Any]:
        overview = await console_store.overview(
            tx, View(None, None), since=ends - timedelta(hours=1), step=300, buckets=12
        )
        return overview, await usage_rows(tx, account_id=None, since=None)

    return await services.db.read(read)


async def test_a_keyed_erasure_is_replayed_byte_for_byte(
    services: Services, app: RelayApp, account: NewAccount
) -> None:
    key = {"Idempotency-Key": "erase-once"}
    async with client(app, account.test_key) as api:
        await post(api, "/v1/verifications", to=NUMBER)
        first = await api.post("/v1/erasures", json={"to": NUMBER}, headers=key)
        await post(api, "/v1/verifications", to=NUMBER)
        again = await api.post("/v1/erasures", json={"to": NUMBER}, headers=key)

    assert first.status_code == again.status_code == 200
    assert again.content == first.content
    assert again.headers["Idempotent-Replayed"] == "true"
    # The replay deleted nothing: the second verification is still there.
    assert (await naming(services, NUMBER))["verifications"] == 1


@pytest.mark.parametrize(
    ("to", "code"),
    [("12", "phone_number_invalid"), ("not an address@", "parameter_invalid"), ("", None)],
)
async def test_a_bad_destination_is_refused_in_the_contracts_error_shape(
    app: RelayApp, account: NewAccount, to: str, code: str | None
) -> None:
    async with client(app, account.test_key) as api:
        refused = await api.post("/v1/erasures", json={"to": to})
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert error["param"] == "to"
    assert error["type"] == "invalid_request_error"
    if code is not None:
        assert error["code"] == code
