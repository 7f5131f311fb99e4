"""Authentication: one 401 for every bad key, key scoping, hashing at rest and key limits."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest

from relay.accounts.models import ApiKey, Mode, NewAccount
from relay.config import Settings
from relay.errors import RelayError
from relay.services import build_services
from tests.harness import RunningServer, create_account, every_stored_value

URL = "/v1/verifications"
NUMBER = "+14155552671"
UNKNOWN_KEY = "sk_test_" + "A1b2C3d4" * 4


def keys_of(settings: Settings, account_id: str) -> list[ApiKey]:
    async def work() -> list[ApiKey]:
        services = build_services(settings)
        try:
            return await services.accounts.list_keys(account_id)
        finally:
            await services.close()

    return asyncio.run(work())


def revoke(settings: Settings, account_id: str, *, livemode: bool) -> None:
    async def work() -> None:
        services = build_services(settings)
        try:
            for key in await services.accounts.list_keys(account_id):
                if key.livemode == livemode and key.revoked_at is None:
                    await services.accounts.revoke_key(key.id)
        finally:
            await services.close()

    asyncio.run(work())


def new_key(settings: Settings, account_id: str, mode: Mode = "test") -> str:
    async def work() -> str:
        services = build_services(settings)
        try:
            _, raw = await services.accounts.create_key(account_id, mode)
            return raw
        finally:
            await services.close()

    return asyncio.run(work())


def raw_client(server: RunningServer, headers: dict[str, str]) -> httpx.Client:
    return httpx.Client(
        base_url=server.base_url, verify=server.tls_context(), headers=headers, timeout=30
    )


@pytest.fixture
def anonymous(server: RunningServer) -> Iterator[httpx.Client]:
    with server.client(None) as client:
        yield client


def assert_401(response: httpx.Response) -> None:
    assert response.status_code == 401, response.text
    assert response.headers["www-authenticate"] == "Bearer"
    assert response.headers["request-id"].startswith("req_")
    error = response.json()["error"]
    assert error["type"] == "authentication_error"
    assert error["code"] == "authentication_failed"
    assert "param" not in error


def test_every_kind_of_bad_key_gets_the_same_401(
    server: RunningServer, account: NewAccount
) -> None:
    revoked = create_account(server.settings, "Revoked")
    revoke(server.settings, revoked.id, livemode=False)
    attempts = {
        "no header": {},
        "basic": {"Authorization": "Basic xyz"},
        "bearer garbage": {"Authorization": "Bearer garbage"},
        "bearer alone": {"Authorization": "Bearer"},
        "key without bearer": {"Authorization": account.test_key},
        "unknown key": {"Authorization": f"Bearer {UNKNOWN_KEY}"},
        "unknown live key": {"Authorization": f"Bearer sk_live_{'Z' * 32}"},
        "truncated key": {"Authorization": f"Bearer {account.test_key[:-1]}"},
        "revoked key": {"Authorization": f"Bearer {revoked.test_key}"},
    }
    bodies: dict[str, bytes] = {}
    for name, headers in attempts.items():
        with raw_client(server, headers) as client:
            response = client.get(URL)
        assert_401(response)
        bodies[name] = response.content
    assert len(set(bodies.values())) == 1, bodies


def test_the_bearer_scheme_name_is_case_insensitive(
    server: RunningServer, account: NewAccount
) -> None:
    for scheme in ("bearer", "BEARER"):
        with raw_client(server, {"Authorization": f"{scheme} {account.test_key}"}) as client:
            assert client.get(URL).status_code == 200


def test_the_401_is_the_same_on_every_route_and_method(
    anonymous: httpx.Client,
) -> None:
    responses = [
        anonymous.get(URL),
        anonymous.post(URL, json={"to": NUMBER}),
        anonymous.post(f"{URL}/check", json={"to": NUMBER, "code": "000000"}),
        anonymous.get(f"{URL}/ver_01J00000000000000000000000"),
        anonymous.post(f"{URL}/ver_01J00000000000000000000000/cancel"),
    ]
    for response in responses:
        assert_401(response)
    assert len({response.content for response in responses}) == 1


def test_a_revoked_key_fails_on_the_very_next_request(
    server: RunningServer, account: NewAccount, api: httpx.Client, live_api: httpx.Client
) -> None:
    assert api.get(URL).status_code == 200
    revoke(server.settings, account.id, livemode=False)
    assert_401(api.get(URL))
    assert_401(api.post(URL, json={"to": NUMBER}))
    # The account's other key is untouched.
    assert live_api.get(URL).status_code == 200


def test_a_revoked_key_cannot_act_on_what_it_made_and_its_attempts_count_nothing(
    server: RunningServer, account: NewAccount, api: httpx.Client
) -> None:
    verification = api.post(URL, json={"to": NUMBER}).json()
    revoke(server.settings, account.id, livemode=False)
    assert_401(api.post(f"{URL}/check", json={"id": verification["id"], "code": "000000"}))
    assert_401(api.post(f"{URL}/{verification['id']}/cancel"))
    with server.client(new_key(server.settings, account.id)) as rolled:
        current = rolled.get(f"{URL}/{verification['id']}").json()
    assert current["status"] == "pending"
    assert current["remaining_checks"] == 5


def test_a_key_cannot_read_another_accounts_verification(
    server: RunningServer, api: httpx.Client
) -> None:
    other = create_account(server.settings, "Other")
    with server.client(other.test_key) as other_api:
        theirs = other_api.post(URL, json={"to": NUMBER}).json()
        mine = api.post(URL, json={"to": NUMBER}).json()
        assert theirs["id"] != mine["id"]
        for client, foreign in ((api, theirs["id"]), (other_api, mine["id"])):
            response = client.get(f"{URL}/{foreign}")
            assert response.status_code == 404
            assert response.json()["error"]["code"] == "resource_missing"
            assert foreign not in {item["id"] for item in client.get(URL).json()["data"]}
        assert other_api.get(f"{URL}/{theirs['id']}").json()["status"] == "pending"


def test_live_and_test_keys_of_one_account_see_separate_data(
    api: httpx.Client, live_api: httpx.Client
) -> None:
    test_made = api.post(URL, json={"to": NUMBER}).json()
    assert test_made["livemode"] is False
    assert live_api.get(f"{URL}/{test_made['id']}").status_code == 404
    assert live_api.get(URL).json()["data"] == []
    assert live_api.get(URL, params={"to": NUMBER}).json()["data"] == []
    check = live_api.post(f"{URL}/check", json={"to": NUMBER, "code": "000000"})
    assert check.status_code == 404
    assert live_api.post(f"{URL}/{test_made['id']}/cancel").status_code == 404
    assert api.get(f"{URL}/{test_made['id']}").json()["status"] == "pending"


def test_only_a_hash_of_each_key_is_stored(server: RunningServer, account: NewAccount) -> None:
    values = [_text(value) for value in every_stored_value(server.settings)]
    assert values
    for raw in (account.test_key, account.live_key):
        secret_part = raw.split("_", 2)[2]
        assert len(secret_part) == 32
        leaks = [value for value in values if raw in value or secret_part in value]
        assert leaks == [], f"{raw[:8]}… is stored in clear"
    stored_keys = keys_of(server.settings, account.id)
    assert {key.last4 for key in stored_keys} == {account.test_key[-4:], account.live_key[-4:]}


def _text(value: object) -> str:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("latin-1")
    return str(value)


def test_an_account_may_hold_two_active_keys_per_mode_and_no_more(
    server: RunningServer, account: NewAccount
) -> None:
    async def work() -> tuple[str, str, str]:
        services = build_services(server.settings)
        try:
            _, second = await services.accounts.create_key(account.id, "test")
            with pytest.raises(RelayError) as refused:
                await services.accounts.create_key(account.id, "test")
            assert refused.value.code == "key_limit_reached"
            # Live keys are counted apart: the second live key is allowed.
            _, live_second = await services.accounts.create_key(account.id, "live")
            # Rolling: revoke the old test key, then a new one may be made.
            old = next(
                key
                for key in await services.accounts.list_keys(account.id)
                if not key.livemode and key.last4 == account.test_key[-4:]
            )
            await services.accounts.revoke_key(old.id)
            _, third = await services.accounts.create_key(account.id, "test")
            return second, live_second, third
        finally:
            await services.close()

    second, live_second, third = asyncio.run(work())
    assert second.startswith("sk_test_")
    assert third.startswith("sk_test_")
    assert live_second.startswith("sk_live_")
    for i, (key, expected) in enumerate(((second, 200), (third, 200), (live_second, 503))):
        with server.client(key) as client:
            assert client.get(URL).status_code == 200
            assert client.post(URL, json={"to": f"+1415555{i:04d}"}).status_code == expected
    with server.client(account.test_key) as client:
        assert_401(client.get(URL))
    active = [key for key in keys_of(server.settings, account.id) if key.revoked_at is None]
    assert sorted(key.livemode for key in active) == [False, False, True, True]
