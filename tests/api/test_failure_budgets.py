"""The failed-authentication budget, met from real client addresses (127.0.0.2 ...): only
failures spend it, only failures are refused once it is spent, a refused guess reads no
database, and carrier callbacks are not API authentication."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from relay.services import Services
from tests.carriers.test_twilio import ACCOUNT_SID, AUTH_TOKEN, VALID_FROM
from tests.carriers.twilio_fake import sign
from tests.harness import (
    RunningServer,
    ServerThread,
    create_account,
    free_port,
    test_settings,
    traced,
    using_services,
)

BUDGET = 5
CALLBACK = "/v1/carriers/twilio-main/status"
UNKNOWN = "sk_test_" + "u" * 32


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, database_url: str) -> Iterator[RunningServer]:
    """Five failures per address, then nothing for 100 s; no proxy: the TCP peer is the
    client. A Twilio carrier, for its status callbacks only (nothing is sent through it).
    No background loops: every statement the server runs is a request's."""
    port = free_port()
    settings = test_settings(
        tmp_path_factory.mktemp("budgets"),
        database_url,
        auth_failure_rate=0.05,
        auth_failure_burst=BUDGET,
        public_url=f"https://127.0.0.1:{port}",
        carriers={
            "twilio-main": {
                "kind": "http",
                "provider": "twilio",
                "account_sid": ACCOUNT_SID,
                "auth_token": AUTH_TOKEN,
                "from_number": VALID_FROM,
                "base_url": "https://127.0.0.1:9",
            },
            "backup": {"kind": "sandbox"},
        },
        routes={"default": ["backup"]},
        serve_background=False,  # statements counted here are the requests' own
    )
    with ServerThread(settings, port=port) as running:
        yield running


def spend(server: RunningServer, address: str) -> None:
    """Spend `address`'s budget with wrong keys, and see it spent."""
    with server.from_address(address, "sk_test_" + "w" * 32) as guesser:
        assert [guesser.get("/v1/verifications").status_code for _ in range(BUDGET)] == [
            401
        ] * BUDGET
        refused = guesser.get("/v1/verifications")
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "rate_limited"
    assert int(refused.headers["retry-after"]) >= 1


def status(server: RunningServer, address: str, key: str | None) -> int:
    with server.from_address(address, key) as client:
        return client.get("/v1/verifications").status_code


def test_a_valid_key_is_served_from_an_address_over_its_failure_budget(
    server: RunningServer,
) -> None:
    # Made by another process: this server has never seen these keys.
    account = create_account(server.settings)
    spend(server, "127.0.0.2")
    assert [status(server, "127.0.0.2", account.test_key) for _ in range(3)] == [200] * 3
    assert status(server, "127.0.0.2", account.live_key) == 200
    # Still over budget for anything that does not authenticate.
    for wrong in (UNKNOWN, "not-a-key", None):
        assert status(server, "127.0.0.2", wrong) == 429


def test_a_guess_from_an_address_over_budget_reads_no_database(server: RunningServer) -> None:
    account = create_account(server.settings)
    spend(server, "127.0.0.3")
    assert status(server, "127.0.0.3", account.test_key) == 200
    with traced(server.services) as statements:
        for wrong in ["not-a-key", None, "sk_live_short"] * 5:
            assert status(server, "127.0.0.3", wrong) == 429
    assert statements == []

    async def guess_at_once(count: int) -> list[int]:
        async def one(i: int) -> int:
            key = "sk_live_" + f"{i:04d}" * 8
            async with server.async_from_address("127.0.0.3", key) as guesser:
                return (await guesser.get("/v1/verifications")).status_code

        return await asyncio.gather(*(one(i) for i in range(count)))

    started = time.monotonic()
    with traced(server.services) as statements:
        assert set(asyncio.run(guess_at_once(40))) == {429}
    seconds = time.monotonic() - started
    # Forty well-formed guesses: a snapshot of the valid keys a second at most between
    # them (the first may have been queued before), never a key looked up.
    assert 1 <= len(statements) <= 2 + int(seconds), (seconds, statements)
    assert all("SELECT key_hash FROM api_keys" in text for text in statements), statements


def test_a_key_revoked_elsewhere_is_refused_on_its_next_request_over_budget(
    server: RunningServer,
) -> None:
    account = create_account(server.settings)
    assert status(server, "127.0.0.6", account.test_key) == 200  # known to this process now
    spend(server, "127.0.0.6")
    revoke(server, account.test_key)
    # Its row is read, as for every key the process knows: 401, then it is forgotten.
    assert status(server, "127.0.0.6", account.test_key) == 401
    with traced(server.services) as statements:
        assert status(server, "127.0.0.6", account.test_key) == 429
    assert not any("key_hash = " in text for text in statements), statements


def test_callbacks_neither_spend_nor_meet_the_api_failure_budget(server: RunningServer) -> None:
    url = server.settings.public_url + CALLBACK  # type: ignore[operator]
    form = {"AccountSid": ACCOUNT_SID, "MessageSid": "SM" + "0" * 32, "MessageStatus": "sent"}
    with server.from_address("127.0.0.4") as forger:
        forged = [
            forger.post(CALLBACK, data=form, headers={"X-Twilio-Signature": "forged"})
            for _ in range(2 * BUDGET)
        ]
    assert {answer.status_code for answer in forged} == {401}
    # The forgeries spent none of the address's API budget: a wrong key is still a 401.
    assert status(server, "127.0.0.4", UNKNOWN) == 401

    spend(server, "127.0.0.5")
    with server.from_address("127.0.0.5") as carrier:
        genuine = carrier.post(
            CALLBACK, data=form, headers={"X-Twilio-Signature": sign(AUTH_TOKEN, url, form)}
        )
    assert genuine.status_code == 204, genuine.text


def revoke(server: RunningServer, raw: str) -> None:
    async def go(services: Services) -> None:
        caller = await services.accounts.authenticate(raw)
        await services.accounts.revoke_key(caller.key_id)

    using_services(server.settings, go)
