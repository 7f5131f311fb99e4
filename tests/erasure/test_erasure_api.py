"""Erasure over the API: every row of the key's account and mode that names a destination
is deleted and counted, a pending send never leaves, nothing else is touched, and the
figures read the same."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from relay.accounts.models import NewAccount
from relay.console import store as console_store
from relay.console.scope import View
from relay.db.sql import Tx
from relay.services import Services
from relay.web.app import RelayApp
from tests.erasure.support import (
    DELIVERED,
    NAMING,
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
        assert before["events"] >= 2
        assert before["counters"] >= 1
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
        assert before[0].verifications, "figures a deletion could lose"
        assert before[1], "usage a deletion could lose"

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
