"""Keys over real HTTPS: a roll's overlap, revocation at once, CIDR restrictions, and
what the operator is told about a refusal (the caller never is)."""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import TypeVar

import httpx
import pytest

from relay.accounts.models import ApiKey, NewAccount
from relay.accounts.service import AccountService
from relay.config import Settings
from relay.db.sql import Sql
from relay.errors import RelayError
from relay.services import build_services
from tests.api.test_auth import UNKNOWN_KEY, assert_401
from tests.harness import RunningServer, ServerThread, create_account, test_settings

URL = "/v1/verifications"
T = TypeVar("T")
LOOPBACK = [ipaddress.ip_network("127.0.0.0/8")]
ELSEWHERE = [ipaddress.ip_network("10.0.0.0/8")]


def manage(settings: Settings, action: Callable[[AccountService], Awaitable[T]]) -> T:
    """Run `action` on services of their own, as the CLI or the console does."""

    async def work() -> T:
        services = build_services(settings)
        try:
            return await action(services.accounts)
        finally:
            await services.close()

    return asyncio.run(work())


def the_test_key(settings: Settings, account: NewAccount) -> ApiKey:
    keys = manage(settings, lambda accounts: accounts.list_keys(account.id))
    return next(key for key in keys if key.last4 == account.test_key[-4:])


def the_401_of_an_unknown_key(server: RunningServer) -> object:
    with server.client(UNKNOWN_KEY) as client:
        return client.get(URL).json()


def test_a_rolled_key_and_its_successor_both_work_until_the_overlap_ends(
    server: RunningServer, account: NewAccount, api: httpx.Client
) -> None:
    old = the_test_key(server.settings, account)
    rolled = manage(server.settings, lambda accounts: accounts.roll_key(old.id, 3600))
    assert rolled.previous.state == "rolling"
    assert rolled.key.state == "active"
    assert rolled.secret.startswith("sk_test_")
    with server.client(rolled.secret) as new:
        assert api.get(URL).status_code == 200
        assert new.get(URL).status_code == 200
        server.clock.advance(3599)
        assert api.get(URL).status_code == 200
        server.clock.advance(2)
        refused = api.get(URL)
        assert_401(refused)
        assert refused.json() == the_401_of_an_unknown_key(server)
        assert new.get(URL).status_code == 200


def test_a_roll_without_an_overlap_ends_the_old_key_at_once(
    server: RunningServer, account: NewAccount, api: httpx.Client
) -> None:
    old = the_test_key(server.settings, account)
    rolled = manage(server.settings, lambda accounts: accounts.roll_key(old.id, 0))
    assert_401(api.get(URL))
    with server.client(rolled.secret) as new:
        assert new.get(URL).status_code == 200


@pytest.mark.parametrize("overlap", [-1, 86401, float("nan"), float("inf")])
def test_an_overlap_outside_zero_to_24_hours_is_refused(
    server: RunningServer, account: NewAccount, overlap: float
) -> None:
    old = the_test_key(server.settings, account)
    with pytest.raises(RelayError) as refused:
        manage(server.settings, lambda accounts: accounts.roll_key(old.id, overlap))
    assert refused.value.param == "overlap"
    assert the_test_key(server.settings, account).state == "active"


def test_a_rolling_key_does_not_roll_again_and_a_revoked_one_is_missing(
    server: RunningServer, account: NewAccount
) -> None:
    old = the_test_key(server.settings, account)
    manage(server.settings, lambda accounts: accounts.roll_key(old.id, 60))
    with pytest.raises(RelayError) as again:
        manage(server.settings, lambda accounts: accounts.roll_key(old.id, 60))
    assert "rolling" in again.value.message
    manage(server.settings, lambda accounts: accounts.revoke_key(old.id))
    with pytest.raises(RelayError) as revoked:
        manage(server.settings, lambda accounts: accounts.roll_key(old.id, 60))
    assert revoked.value.code == "resource_missing"


def test_a_revoked_key_is_refused_on_the_next_request_even_while_rolling(
    server: RunningServer, account: NewAccount, api: httpx.Client
) -> None:
    old = the_test_key(server.settings, account)
    manage(server.settings, lambda accounts: accounts.roll_key(old.id, 3600))
    assert api.get(URL).status_code == 200
    manage(server.settings, lambda accounts: accounts.revoke_key(old.id))
    assert_401(api.get(URL))


def test_a_key_restricted_to_loopback_answers_and_one_restricted_elsewhere_gets_the_same_401(
    server: RunningServer, account: NewAccount, api: httpx.Client
) -> None:
    key = the_test_key(server.settings, account)
    manage(server.settings, lambda accounts: accounts.restrict_key(key.id, LOOPBACK))
    assert api.get(URL).status_code == 200
    manage(server.settings, lambda accounts: accounts.restrict_key(key.id, ELSEWHERE))
    refused = api.post(URL, json={"to": "+14155552671"})
    assert_401(refused)
    assert refused.json() == the_401_of_an_unknown_key(server)
    manage(server.settings, lambda accounts: accounts.restrict_key(key.id, None))
    assert api.get(URL).status_code == 200


def test_a_client_cannot_claim_an_allowed_address_through_a_proxy_it_is_not(
    server: RunningServer, account: NewAccount
) -> None:
    key = the_test_key(server.settings, account)
    manage(server.settings, lambda accounts: accounts.restrict_key(key.id, ELSEWHERE))
    headers = {"Authorization": f"Bearer {account.test_key}", "X-Forwarded-For": "10.1.2.3"}
    with httpx.Client(
        base_url=server.base_url, verify=server.tls_context(), headers=headers
    ) as client:
        assert_401(client.get(URL))


def test_the_operator_is_told_why_a_key_was_refused_at_most_once_a_minute(
    server: RunningServer, account: NewAccount, api: httpx.Client
) -> None:
    key = the_test_key(server.settings, account)
    manage(server.settings, lambda accounts: accounts.restrict_key(key.id, ELSEWHERE))
    assert_401(api.get(URL))
    noted = the_test_key(server.settings, account)
    assert noted.last_refused_reason == "address 127.0.0.1 outside 10.0.0.0/8"
    assert noted.last_refused_at is not None
    manage(server.settings, lambda accounts: accounts.revoke_key(key.id))
    assert_401(api.get(URL))
    assert the_test_key(server.settings, account).last_refused_at == noted.last_refused_at
    server.clock.advance(61)
    assert_401(api.get(URL))
    assert the_test_key(server.settings, account).last_refused_reason == "revoked"


def test_a_key_past_its_overlap_is_noted_as_expired_after_roll(
    server: RunningServer, account: NewAccount, api: httpx.Client
) -> None:
    old = the_test_key(server.settings, account)
    manage(server.settings, lambda accounts: accounts.roll_key(old.id, 10))
    server.clock.advance(11)
    assert_401(api.get(URL))
    assert the_test_key(server.settings, account).last_refused_reason == "expired after roll"


def test_the_listing_shows_state_ranges_and_last_use_but_never_a_secret(
    server: RunningServer, account: NewAccount, api: httpx.Client
) -> None:
    old = the_test_key(server.settings, account)
    assert old.last_used_at is None
    assert api.get(URL).status_code == 200
    manage(server.settings, lambda accounts: accounts.restrict_key(old.id, LOOPBACK))
    rolled = manage(server.settings, lambda accounts: accounts.roll_key(old.id, 600))
    keys = {key.id: key for key in manage(server.settings, lambda a: a.list_keys(account.id))}
    previous, successor = keys[old.id], keys[rolled.key.id]
    assert previous.state == "rolling"
    assert previous.expires_at == rolled.previous.expires_at
    assert previous.last_used_at is not None
    # The successor inherits the ranges: a roll never widens where a key works.
    assert successor.networks == ("127.0.0.0/8",)
    assert successor.redacted == f"sk_test_…{rolled.secret[-4:]}"
    text = repr(list(keys.values()))
    assert account.test_key not in text
    assert rolled.secret not in text


def test_a_bad_range_is_refused_with_the_range_named(
    server: RunningServer, account: NewAccount
) -> None:
    from relay.accounts.access import parse_networks

    for text in ("10.0.0.1/8", "10.0.0.0/33", "example.com", ","):
        with pytest.raises(RelayError) as refused:
            parse_networks(text)
        assert refused.value.param == "networks"


@pytest.fixture(scope="module")
def behind_proxy(
    tmp_path_factory: pytest.TempPathFactory, database_url: str
) -> Iterator[RunningServer]:
    """A server that believes X-Forwarded-For from loopback (`trusted_proxies`)."""
    data: Path = tmp_path_factory.mktemp("proxied")
    with ServerThread(test_settings(data, database_url, trusted_proxies=LOOPBACK)) as running:
        yield running


def test_behind_a_trusted_proxy_the_forwarded_client_address_is_the_one_checked(
    behind_proxy: RunningServer,
) -> None:
    account = create_account(behind_proxy.settings)
    key = the_test_key(behind_proxy.settings, account)
    manage(behind_proxy.settings, lambda accounts: accounts.restrict_key(key.id, ELSEWHERE))

    def call(forwarded: str) -> httpx.Response:
        headers = {"Authorization": f"Bearer {account.test_key}", "X-Forwarded-For": forwarded}
        with httpx.Client(
            base_url=behind_proxy.base_url, verify=behind_proxy.tls_context(), headers=headers
        ) as client:
            return client.get(URL)

    assert call("10.1.2.3").status_code == 200
    # Only the right-most hop the proxy appended is believed, not what the client wrote.
    assert_401(call("10.1.2.3, 203.0.113.9"))
    noted = the_test_key(behind_proxy.settings, account)
    assert noted.last_refused_reason == "address 203.0.113.9 outside 10.0.0.0/8"


def key_statements(server: RunningServer, request: Callable[[], httpx.Response]) -> list[str]:
    """The first word of each statement on api_keys the server ran while answering `request`
    (background loops share the tracer, so only the key's table is counted)."""
    seen: list[str] = []

    def trace(statement: Sql, _params: object) -> None:
        if "api_keys" in statement.text:
            seen.append(statement.text.split()[0].upper())

    server.services.db.trace(trace)
    try:
        request()
    finally:
        server.services.db.trace(None)
    return seen


def test_a_key_seen_before_costs_no_lookup_and_no_write(
    server: RunningServer, api: httpx.Client
) -> None:
    created = api.post(URL, json={"to": "+14155552671"}).json()
    # The first request read the key and noted its use for the minute; the next does neither.
    seen = key_statements(server, lambda: api.get(f"{URL}/{created['id']}"))
    assert seen == []


def test_refusals_under_attack_cost_one_lookup_and_one_note_a_minute(
    server: RunningServer, account: NewAccount, api: httpx.Client
) -> None:
    key = the_test_key(server.settings, account)
    manage(server.settings, lambda accounts: accounts.restrict_key(key.id, ELSEWHERE))
    assert key_statements(server, lambda: api.get(URL)) == ["SELECT", "UPDATE"]
    for _ in range(5):
        assert key_statements(server, lambda: api.get(URL)) == []


def test_no_api_route_manages_keys(server: RunningServer) -> None:
    """Keys are managed from the console or the CLI only: a key presented to the API
    can neither make a spare nor act on another key."""
    from relay.web.app import API

    paths = {operation.path for operation in API}
    assert paths, "the route table is empty"
    assert not [path for path in paths if "key" in path.lower()]
    account = create_account(server.settings)
    with server.client(account.test_key) as api:
        documented = api.get("/v1/openapi.json").json()["paths"]
        assert not [path for path in documented if "key" in path.lower()]
        for method, path in (("POST", "/v1/keys"), ("POST", "/v1/api_keys"), ("GET", "/v1/keys")):
            answer = api.request(method, path, json={})
            assert answer.status_code == 404, (method, path)
            assert answer.json()["error"]["code"] == "route_not_found"
