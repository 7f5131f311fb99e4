"""Failed API authentications are limited per client address, as trusted proxies name
it; a valid key is never counted, and the limiter forgets addresses once they expire."""

from __future__ import annotations

import secrets
import socket
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from ipaddress import ip_address

import httpx
import pytest

from relay.accounts import key_store
from relay.services import Services
from relay.web.peers import limit_key
from relay.web.ratelimit import LocalMovingWindow, RequestRateLimiter, window_item
from tests.harness import (
    RunningServer,
    ServerThread,
    create_account,
    read_db,
    run,
    test_settings,
    using_services,
)

REDIS_URL = "redis://127.0.0.1:6379/0"


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory, database_url: str) -> Iterator[RunningServer]:
    """The default budget, behind loopback as a trusted proxy."""
    settings = test_settings(
        tmp_path_factory.mktemp("guarded"), database_url, trusted_proxies=["127.0.0.1/32"]
    )
    with ServerThread(settings) as running:
        yield running


def client(server: RunningServer, key: str | None, address: str) -> httpx.Client:
    made = server.client(key)
    made.headers["X-Forwarded-For"] = address
    return made


def test_a_thousand_failed_authentications_are_limited_while_another_client_is_served(
    guarded: RunningServer,
) -> None:
    account = create_account(guarded.settings)
    budget = guarded.settings.auth_failure_burst
    tally: Counter[int] = Counter()
    # Malformed, so that the refusals are immediate: a well-formed key over budget waits
    # for the next snapshot of valid keys (test_failure_budgets.py).
    with client(guarded, "sk_test_" + "q" * 31, "192.0.2.10") as guesser:
        for _ in range(1000):
            answer = guesser.get("/v1/verifications")
            tally[answer.status_code] += 1
    assert tally == {401: budget, 429: 1000 - budget}
    error = answer.json()["error"]
    assert (error["type"], error["code"]) == ("rate_limit_error", "rate_limited")
    assert int(answer.headers["retry-after"]) >= 1
    with client(guarded, account.test_key, "192.0.2.11") as other:
        assert other.get("/v1/verifications").status_code == 200


def test_missing_malformed_unknown_and_revoked_keys_all_count(guarded: RunningServer) -> None:
    account = create_account(guarded.settings)
    revoked = create_account(guarded.settings).test_key
    _revoke(guarded, revoked)
    budget = guarded.settings.auth_failure_burst
    kinds = [None, "not-a-key", "sk_live_" + "u" * 32, revoked]
    statuses = [
        _get(guarded, kinds[i % len(kinds)], "192.0.2.20").status_code for i in range(budget)
    ]
    assert set(statuses) == {401}
    assert _get(guarded, None, "192.0.2.20").status_code == 429
    assert _get(guarded, account.test_key, "192.0.2.21").status_code == 200


def test_a_client_over_its_budget_is_refused_before_its_key_is_looked_up(
    guarded: RunningServer,
) -> None:
    revoked = create_account(guarded.settings).test_key
    key_id = _revoke(guarded, revoked)
    with client(guarded, "not-a-key", "192.0.2.30") as guesser:
        for _ in range(guarded.settings.auth_failure_burst):
            assert guesser.get("/v1/verifications").status_code == 401
    assert _get(guarded, revoked, "192.0.2.30").status_code == 429
    # A lookup would have noted the refusal on the key.
    assert _stored_key(guarded, key_id).last_refused_at is None


def test_a_valid_key_is_never_counted(
    tmp_path_factory: pytest.TempPathFactory, database_url: str
) -> None:
    settings = test_settings(
        tmp_path_factory.mktemp("counted"),
        database_url,
        auth_failure_rate=0.1,
        auth_failure_burst=3,
    )
    account = create_account(settings)
    with ServerThread(settings) as server, server.client(account.test_key) as api:
        assert {api.get("/v1/verifications").status_code for _ in range(10)} == {200}
        with server.client(None) as anonymous:
            statuses = [anonymous.get("/v1/verifications").status_code for _ in range(4)]
        assert statuses == [401, 401, 401, 429]


def test_pages_under_v1_that_take_no_key_spend_no_budget(
    tmp_path_factory: pytest.TempPathFactory, database_url: str
) -> None:
    settings = test_settings(
        tmp_path_factory.mktemp("pages"), database_url, auth_failure_rate=0.1, auth_failure_burst=2
    )
    with ServerThread(settings) as server, server.client(None) as anonymous:
        assert {anonymous.get("/v1/openapi.json").status_code for _ in range(5)} == {200}
        assert anonymous.get("/v1/verifications").status_code == 401


def _redis_is_up() -> bool:
    try:
        socket.create_connection(("127.0.0.1", 6379), timeout=1).close()
    except OSError:
        return False
    return True


@pytest.mark.skipif(not _redis_is_up(), reason="needs Redis on 127.0.0.1:6379")
def test_two_processes_share_one_failure_budget_through_redis(
    tmp_path_factory: pytest.TempPathFactory, database_url: str
) -> None:
    # An address of this run's own: the budget outlives the test in Redis.
    address = f"10.{secrets.randbelow(250)}.{secrets.randbelow(250)}.{secrets.randbelow(250)}"
    settings = test_settings(
        tmp_path_factory.mktemp("redis"),
        database_url,
        auth_failure_rate=0.1,
        auth_failure_burst=4,
        rate_limit_storage=REDIS_URL,
        trusted_proxies=["127.0.0.1/32"],
    )
    with ServerThread(settings) as one, ServerThread(settings) as two:
        assert [_get(one, None, address).status_code for _ in range(2)] == [401, 401]
        assert [_get(two, None, address).status_code for _ in range(3)] == [401, 401, 429]
        assert _get(one, None, address).status_code == 429


def test_expired_addresses_leave_the_in_memory_store() -> None:
    now = [1000.0]
    limiter = RequestRateLimiter(rate=1, burst=5, storage_uri="memory://", clock=lambda: now[0])
    assert limiter.local is not None

    async def fail_from_many() -> None:
        for i in range(20_000):
            await limiter.acquire(f"198.18.{i // 250}.{i % 250}")
            now[0] += 0.0001

    run(fail_from_many())
    assert len(limiter.local) == 20_000
    now[0] += 2 * limiter.item.get_expiry()
    assert run(limiter.wait("192.0.2.99")) is None
    assert len(limiter.local) == 0


def test_an_address_still_within_its_window_is_kept_and_still_limited() -> None:
    window = LocalMovingWindow(window_item(1, 2))  # 2 in any 2 s
    assert window.acquire("old", now=0.0) is None
    assert window.acquire("busy", now=2.5) is None
    assert window.acquire("busy", now=2.6) is None
    assert window.wait("busy", now=3.0) == 2
    assert window.wait("busy", now=4.4) == 1
    assert len(window) == 1  # "old" left at the sweep; "busy" is still counting


def _get(server: RunningServer, key: str | None, address: str) -> httpx.Response:
    with client(server, key, address) as made:
        return made.get("/v1/verifications")


def _revoke(server: RunningServer, raw: str) -> str:
    async def revoke(services: Services) -> str:
        key_id = (await services.accounts.authenticate(raw)).key_id
        await services.accounts.revoke_key(key_id)
        return key_id

    return using_services(server.settings, revoke)


def _stored_key(server: RunningServer, key_id: str) -> key_store.ApiKey:
    found = read_db(server.settings, lambda tx: key_store.key(tx, key_id, now=datetime.now(UTC)))
    assert found is not None
    return found


def test_an_ipv6_client_is_counted_by_its_slash_64() -> None:
    one, other = ip_address("2001:db8:1:2::1"), ip_address("2001:db8:1:2:ffff::9")
    assert limit_key(one) == limit_key(other) == "2001:db8:1:2::/64"
    assert limit_key(ip_address("2001:db8:1:3::1")) != limit_key(one)
    assert limit_key(ip_address("::ffff:192.0.2.7")) == limit_key(ip_address("192.0.2.7"))
    assert limit_key(None) == "unknown"
